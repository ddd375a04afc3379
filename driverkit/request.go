package driverkit

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultRequestTimeout bounds one request to a server, whatever the
// caller's context says: a server that has not answered by then is treated
// as unavailable. It is long enough for any healthy server and a loaded
// machine, and short enough that an outage is reported, not waited out.
const DefaultRequestTimeout = 5 * time.Second

// ErrNoAnswer is the cause of a request context that DefaultRequestTimeout
// (or a driver's own request bound) ended. It is classified as unavailable.
var ErrNoAnswer = errors.New("no answer from the server in time")

// RequestError classifies the failure of one request to the server. When
// the caller's ctx ended first, it returns the context's error (wrapped), so
// the portable layer can report a wait that ran out as a wait that ran out.
// Anything else, including a request bound (ErrNoAnswer) or a client
// library's own timeout, is backends.ErrUnavailable with the cause kept.
func RequestError(ctx context.Context, what string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && !errors.Is(context.Cause(ctx), ErrNoAnswer) {
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
	return Unavailable(what, err)
}

// WithRequestTimeout returns ctx bounded by d (DefaultRequestTimeout if d
// is zero), whose cause is ErrNoAnswer when the bound fires.
func WithRequestTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		d = DefaultRequestTimeout
	}
	return context.WithTimeoutCause(ctx, d, ErrNoAnswer)
}
