package conformance

import (
	"context"
	"testing"
	"time"
)

// Poll calls cond every interval until it holds, and returns nil then, or
// until ctx ends, and returns ctx's error: the one polling loop of padlock's
// tests and test servers. WaitFor, WaitState and padlocktest.WaitFor are
// built on it.
func Poll(ctx context.Context, every time.Duration, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
	return nil
}

// WaitFor polls cond until it holds, failing t when within has passed or
// ctx has ended first: a condition, never a sleep standing in for one.
func WaitFor(ctx context.Context, t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	if err := Poll(wctx, 10*time.Millisecond, cond); err != nil {
		t.Fatalf("%s: not within %v: %v", what, within, err)
	}
}
