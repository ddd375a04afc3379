package padlock_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/backends"
)

// A backend that waits for an answer until the caller's deadline (a
// server that accepts connections and says nothing) fails Open with
// ErrUnavailable, the deadline kept as its cause, as a refused dial
// would; a cancelled Open is only cancelled.
func TestOpenDeadlineIsUnavailable(t *testing.T) {
	padlock.Register("x-silent", func(ctx context.Context, _ *url.URL, _ backends.Config) (backends.Driver, error) {
		<-ctx.Done()
		return nil, fmt.Errorf("x-silent connect: %w", ctx.Err())
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := padlock.Open(ctx, "x-silent://host")
	if !errors.Is(err, padlock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Open past the caller's deadline = %v, want ErrUnavailable and context.DeadlineExceeded", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := padlock.Open(ctx, "x-silent://host"); !errors.Is(err, context.Canceled) || errors.Is(err, padlock.ErrUnavailable) {
		t.Errorf("cancelled Open = %v, want context.Canceled and not ErrUnavailable", err)
	}
}
