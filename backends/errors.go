package backends

import "errors"

// The sentinel errors below form the closed set of error classes that drivers
// return and callers branch on. A driver returns these (wrapped with %w, the
// message adding what failed), and spells them backends.Err* only. The root
// package re-exports each of them under the same name, the same value, so
// errors.Is works whichever package the caller imports.
var (
	// ErrNotAcquired is returned by a non-waiting acquisition when another
	// holder has the lock.
	ErrNotAcquired = errors.New("padlock: lock not acquired: held by another owner")

	// ErrTimeout is returned when a bounded wait ends before the lock is
	// acquired. It is always joined with context.DeadlineExceeded.
	ErrTimeout = errors.New("padlock: timed out waiting for lock")

	// ErrNotHeld is returned when releasing or renewing a hold that was
	// already released, expired or taken over.
	ErrNotHeld = errors.New("padlock: lock not held")

	// ErrLost is the reason a hold's Done channel closed before Unlock: the
	// hold can no longer be guaranteed.
	ErrLost = errors.New("padlock: lock lost")

	// ErrUnavailable classifies failures to reach the backend or to get an
	// answer from it in time (network, server down, no quorum).
	ErrUnavailable = errors.New("padlock: backend unavailable")

	// ErrInvalidName is returned for a lock name that fails validation.
	ErrInvalidName = errors.New("padlock: invalid lock name")

	// ErrInvalidOption is returned for an option or URL parameter with a bad
	// value, or a URL parameter the backend does not know.
	ErrInvalidOption = errors.New("padlock: invalid option")

	// ErrInvalidURL is returned for a URL that cannot be parsed or that lacks
	// what its backend needs.
	ErrInvalidURL = errors.New("padlock: invalid url")

	// ErrUnknownScheme is returned by Open for a URL whose scheme has no
	// registered backend.
	ErrUnknownScheme = errors.New("padlock: unknown url scheme")

	// ErrClosed is returned by any call on a Locker after Close.
	ErrClosed = errors.New("padlock: locker closed")

	// ErrAccessDenied is returned when the server refuses the credentials
	// (a wrong password, an unknown user) or the user lacks a permission
	// padlock needs. The message names the server's reason.
	ErrAccessDenied = errors.New("padlock: access denied")

	// ErrUpgrade is returned when an owner that holds only the read side
	// of a read-write lock asks for its write side: the writer would wait
	// for the owner's own reader for ever.
	ErrUpgrade = errors.New("padlock: cannot take the write side while holding only the read side")

	// ErrNoLeader is returned when an election has no leader.
	ErrNoLeader = errors.New("padlock: no leader")

	// ErrUnsupported is returned for an operation the backend (or its
	// configuration) does not offer, such as listing holders.
	ErrUnsupported = errors.New("padlock: not supported by this backend")
)
