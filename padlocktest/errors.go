package padlocktest

import "errors"

var (
	// ErrMissing is returned when no provider can run a server of the kind
	// asked for: its binary is not installed and no container engine
	// answers. Start skips the test on it, unless RequireServers says a
	// missing server is a failure.
	ErrMissing = errors.New("padlocktest: server not available")
	// ErrUnsupported is returned for a kind or option that the chosen
	// provider cannot start (for example TLS, or a Redis Cluster, in
	// containers).
	ErrUnsupported = errors.New("padlocktest: not supported by this provider")
	// ErrInvalid is returned for an unknown kind or provider, or an invalid
	// option.
	ErrInvalid = errors.New("padlocktest: invalid argument")
)
