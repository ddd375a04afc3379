package fence

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// Sentinel errors. Match them with errors.Is; the messages carry the detail.
var (
	// ErrStale is returned when a resource refuses a token lower than the
	// highest it has seen: the caller lost its lock, and a newer holder has
	// already made contact. The write did not happen. The error is a
	// *StaleError, which names the resource and both tokens.
	ErrStale = errors.New("fence: stale token")
	// ErrInvalid is returned for an argument no store can use: an empty or
	// malformed resource name, a token of 0 or above MaxToken, an unknown
	// SQL dialect or a bad table name, a Redis write or ZooKeeper request
	// of a kind the helper does not take. Nothing was written.
	ErrInvalid = errors.New("fence: invalid argument")
	// ErrCrossSlot is returned by Redis, with ErrInvalid, when the client is
	// a Redis Cluster client and the token key and the written keys do not
	// all hash to one slot: a script cannot touch keys of two slots. Give
	// them one hash tag, such as the resource "{orders/42}" and the keys
	// "{orders/42}:total". Nothing was written.
	ErrCrossSlot = errors.New("fence: keys in different Redis Cluster hash slots")
)

// MaxToken is the highest token the stores take: the highest any padlock
// backend hands out (etcd revisions, ZooKeeper zxids and the SQL and Redis
// counters are signed 64-bit integers), and the highest a SQL bigint holds.
const MaxToken = math.MaxInt64

// MaxResourceLen is the longest resource name, in bytes: it fits a
// MySQL/MariaDB utf8mb4 primary key and, escaped, a ZooKeeper node name.
const MaxResourceLen = 255

// StaleError is the error of a refused token. It matches ErrStale.
type StaleError struct {
	Resource string // the resource the write was for
	Token    uint64 // the token offered
	Highest  uint64 // the highest token the resource had seen
}

// Error says which resource refused which token, and the highest it had
// seen.
func (e *StaleError) Error() string {
	return fmt.Sprintf("fence: stale token: resource %q refused token %d, below the highest seen, %d", e.Resource, e.Token, e.Highest)
}

// Unwrap makes errors.Is(err, ErrStale) true.
func (e *StaleError) Unwrap() error { return ErrStale }

// stale returns the refusal of token for resource.
func stale(resource string, token, highest uint64) error {
	return &StaleError{Resource: resource, Token: token, Highest: highest}
}

// invalid returns an ErrInvalid saying what was wrong.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// check validates the resource and token every helper takes.
func check(resource string, token uint64) error {
	switch {
	case resource == "":
		return invalid("resource is empty")
	case len(resource) > MaxResourceLen:
		return invalid("resource is %d bytes, longer than %d", len(resource), MaxResourceLen)
	case !utf8.ValidString(resource):
		return invalid("resource %q is not valid UTF-8", resource)
	case strings.IndexByte(resource, 0) >= 0:
		return invalid("resource %q contains a NUL byte", resource)
	case token == 0:
		return invalid("token is 0, which no lock hands out (a Lock never acquired?)")
	case token > MaxToken:
		return invalid("token %d is above MaxToken (%d)", token, uint64(MaxToken))
	}
	return nil
}
