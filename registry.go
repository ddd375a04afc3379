package padlock

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

var registry = struct {
	sync.RWMutex
	openers map[string]backends.Opener
}{openers: map[string]backends.Opener{}}

// Register makes a backend available to Open under a URL scheme. Backends
// call it from init. It panics if opener is nil, the scheme is empty, or the
// scheme is already registered, as database/sql.Register does.
func Register(scheme string, opener backends.Opener) {
	if opener == nil {
		panic("padlock: Register opener is nil")
	}
	if scheme == "" {
		panic("padlock: Register scheme is empty")
	}
	scheme = strings.ToLower(scheme)
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.openers[scheme]; dup {
		panic("padlock: Register called twice for scheme " + scheme)
	}
	registry.openers[scheme] = opener
}

// Schemes returns the registered URL schemes, sorted.
func Schemes() []string {
	registry.RLock()
	defer registry.RUnlock()
	var s []string
	for k := range registry.openers {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// EnvURL is the environment variable that OpenEnv and the padlock command
// read the backend URL from.
const EnvURL = "PADLOCK_URL"

// Open connects to the backend named by rawURL's scheme and returns a Locker.
// The query parameters ttl and wait set the Locker's defaults (as WithTTL and
// WithWait do); opts override them. Every other parameter belongs to the
// backend, and one it does not know is an error. A query that does not
// parse (a ";" where "&" belongs, a bad %-escape) is ErrInvalidURL.
//
//	etcd://127.0.0.1:2379/padlock?ttl=10s
//	mem://test
//
// Open bounds its own wait for the server: an unreachable one fails with
// ErrUnavailable, carrying the dial error, within the backend's dial
// timeout, whatever ctx says.
func Open(ctx context.Context, rawURL string, opts ...OpenOption) (_ *Locker, err error) {
	if ctx == nil {
		panic("padlock: Open called with a nil Context")
	}
	defer func() { err = tidy(err) }()
	u, perr := url.Parse(rawURL)
	if perr != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidURL, redact(perr))
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("%w: %q has no scheme; want something like etcd://127.0.0.1:2379/padlock", ErrInvalidURL, RedactURL(rawURL))
	}
	scheme := strings.ToLower(u.Scheme)
	registry.RLock()
	opener := registry.openers[scheme]
	registry.RUnlock()
	if opener == nil {
		return nil, fmt.Errorf("%w: %q (registered: %s); did you forget to import its backend, e.g. _ \"github.com/padlock-go/padlock/all\"?",
			ErrUnknownScheme, u.Scheme, strings.Join(Schemes(), ", "))
	}
	s := defaultOpenSettings()
	if s.defaults, err = defaultsFromQuery(u); err != nil {
		return nil, err
	}
	if s, err = s.apply(opts); err != nil {
		return nil, err
	}
	s.backend = scheme
	drv, err := opener(ctx, u, backends.Config{Logger: s.logger, TLS: s.tls, Dial: s.dial})
	if err != nil {
		return nil, openError(ctx, err)
	}
	return newLocker(drv, s), nil
}

// openError classifies a failed Open. The caller's deadline ending before
// the server answered is an outage to Open, as a refused dial is: the
// error matches ErrUnavailable, and context.DeadlineExceeded still. (A
// silent server makes a backend wait for an answer that a refusing one
// would have given at once.)
func openError(ctx context.Context, err error) error {
	if !errors.Is(err, ErrUnavailable) && errors.Is(err, context.DeadlineExceeded) && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return driverkit.Unavailable("open", err)
	}
	return err
}

// OpenEnv is Open with the URL in the PADLOCK_URL environment variable, the
// way the padlock command finds its backend. An unset or empty variable is
// ErrInvalidURL.
func OpenEnv(ctx context.Context, opts ...OpenOption) (*Locker, error) {
	u := os.Getenv(EnvURL)
	if u == "" {
		return nil, tidy(fmt.Errorf("%w: %s is not set; set it to a backend URL such as etcd://127.0.0.1:2379/padlock", ErrInvalidURL, EnvURL))
	}
	return Open(ctx, u, opts...)
}

// NewLocker returns a Locker over a driver that a backend package built,
// for example from a client the application already has (etcd.New,
// redis.New). The Locker closes the driver when it closes; whether that
// closes the client is the backend's documented choice (a client the
// application passed in is never closed).
func NewLocker(drv backends.Driver, opts ...OpenOption) (*Locker, error) {
	if drv == nil {
		return nil, tidy(fmt.Errorf("%w: nil driver", ErrInvalidOption))
	}
	s, err := defaultOpenSettings().apply(opts)
	if err != nil {
		return nil, tidy(err)
	}
	return newLocker(drv, s), nil
}

// redact removes a password from a url.Parse error, which quotes the URL.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = RedactURL(ue.URL)
	}
	return err
}

// RedactURL returns a lock server URL fit to print: the password in its
// user part, the one in a ZooKeeper digest=user:password parameter, and a
// PostgreSQL sslpassword=, replaced by "xxxxx". A URL that does not parse is
// "(unparsable url)"; a query that does not parse is "(unparsable query)".
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable url)"
	}
	q, err := driverkit.Query(u)
	if err != nil {
		// u.Query() would drop the part that does not parse, and a
		// password in it would print as it is.
		u.RawQuery = "(unparsable query)"
		return u.Redacted()
	}
	if d := q.Get("digest"); strings.Contains(d, ":") {
		user, _, _ := strings.Cut(d, ":")
		q.Set("digest", user+":xxxxx")
		u.RawQuery = q.Encode()
	}
	if q.Has("sslpassword") { // PostgreSQL's client key passphrase
		q.Set("sslpassword", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// defaultsFromQuery takes the portable parameters out of u's query. It is
// where every URL given to Open has its query checked (driverkit.Query): a
// query that does not parse is ErrInvalidURL on every scheme, and the
// backend's opener gets the query re-encoded, with nothing dropped.
func defaultsFromQuery(u *url.URL) (settings, error) {
	s := defaultSettings()
	q, err := driverkit.Query(u)
	if err != nil {
		return s, err
	}
	for key, opt := range map[string]func(time.Duration) Option{"ttl": WithTTL, "wait": WithWait} {
		vs, ok := q[key]
		if !ok {
			continue
		}
		if len(vs) != 1 {
			return s, fmt.Errorf("%w: url parameter %s given %d times", ErrInvalidOption, key, len(vs))
		}
		d, err := time.ParseDuration(vs[0])
		if err != nil {
			return s, fmt.Errorf("%w: url parameter %s=%q: %v", ErrInvalidOption, key, vs[0], err)
		}
		if err := opt(d).applyLock(&s); err != nil {
			return s, err
		}
		q.Del(key)
	}
	u.RawQuery = q.Encode()
	return s, nil
}
