package padlock

import (
	"strings"

	"github.com/padlock-go/padlock/backends"
)

// Sentinel errors. Match them with errors.Is; the messages carry the detail.
// Each is the same value as its twin in package backends.
var (
	// ErrNotAcquired is returned by TryLock when another owner holds the name.
	ErrNotAcquired = backends.ErrNotAcquired
	// ErrTimeout is returned when a wait bounded by WithWait or by a context
	// deadline runs out. It comes joined with context.DeadlineExceeded.
	ErrTimeout = backends.ErrTimeout
	// ErrNotHeld is returned by Unlock when the hold was already released,
	// was lost, or expired on the server.
	ErrNotHeld = backends.ErrNotHeld
	// ErrLost is what Lock.Err returns after Done closed because the hold can
	// no longer be guaranteed (renewal failed, session expired, client cut off).
	ErrLost = backends.ErrLost
	// ErrUnavailable classifies failures to reach the backend.
	ErrUnavailable = backends.ErrUnavailable
	// ErrInvalidName is returned for an empty name, one longer than
	// MaxNameLen bytes, invalid UTF-8, or a name containing NUL.
	ErrInvalidName = backends.ErrInvalidName
	// ErrInvalidOption is returned for an option or URL parameter that is out
	// of range or unknown to the backend.
	ErrInvalidOption = backends.ErrInvalidOption
	// ErrInvalidURL is returned by Open for a URL it cannot parse or use.
	ErrInvalidURL = backends.ErrInvalidURL
	// ErrUnknownScheme is returned by Open when no backend is registered for
	// the URL's scheme; the message lists the registered ones.
	ErrUnknownScheme = backends.ErrUnknownScheme
	// ErrClosed is returned by every call on a closed Locker, and by
	// Lock.Err for holds that Close released.
	ErrClosed = backends.ErrClosed
	// ErrAccessDenied is returned when the server refuses the credentials
	// or the user lacks a permission padlock needs.
	ErrAccessDenied = backends.ErrAccessDenied
	// ErrUpgrade is returned by Lock and TryLock when the context's owner
	// holds only the read side of the name (RLock): the writer would wait
	// for the owner's own reader for ever. Unlock the read side first, or
	// take the write side first and RLock under it (see docs/readwrite.md).
	ErrUpgrade = backends.ErrUpgrade
	// ErrNoLeader is returned by Election.Leader when the election has no
	// leader.
	ErrNoLeader = backends.ErrNoLeader
	// ErrUnsupported is returned for an operation the backend does not
	// offer, such as Holders or ForceUnlock on a backend without them.
	ErrUnsupported = backends.ErrUnsupported
)

// errPrefix starts every message of an error padlock's API returns, once.
const errPrefix = "padlock: "

// tidy returns err as padlock's API returns it: its message names padlock
// once, at the start, however many of padlock's errors it wraps (each
// sentinel's own message starts with "padlock: ", so "unlock: " + ErrNotHeld
// + ErrClosed read "padlock: lock not held: padlock: locker closed").
// errors.Is and errors.As see through it. nil and a bare sentinel are
// returned as they are.
func tidy(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*apiError); ok {
		return err
	}
	for _, s := range sentinels {
		if err == s {
			return err
		}
	}
	return &apiError{err}
}

// sentinels are the errors tidy leaves alone.
var sentinels = []error{ErrNotAcquired, ErrTimeout, ErrNotHeld, ErrLost, ErrUnavailable, ErrInvalidName,
	ErrInvalidOption, ErrInvalidURL, ErrUnknownScheme, ErrClosed, ErrAccessDenied, ErrUpgrade, ErrNoLeader, ErrUnsupported}

// apiError is an error as padlock's API returns it (see tidy).
type apiError struct{ err error }

func (e *apiError) Error() string {
	return errPrefix + strings.ReplaceAll(e.err.Error(), errPrefix, "")
}
func (e *apiError) Unwrap() error { return e.err }
