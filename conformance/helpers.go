package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
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

// NewLocker opens a Locker through h, failing t if it cannot, and closes
// it when t ends: for tests outside the suite that use a harness.
func NewLocker(ctx context.Context, t testing.TB, h Harness, opts ...padlock.OpenOption) *padlock.Locker {
	t.Helper()
	l, err := h.NewLocker(ctx, opts...)
	if err != nil {
		t.Fatalf("NewLocker: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// Cycle takes name on l and releases it, failing t if either fails: a
// check that l works, for tests outside the suite.
func Cycle(ctx context.Context, t testing.TB, l *padlock.Locker, name string) {
	t.Helper()
	lk, err := l.Lock(ctx, name)
	if err != nil {
		t.Fatalf("Lock(%q): %v", name, err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("Unlock(%q): %v", name, err)
	}
}

// Signal waits for one signal on ch (a Locker.WatchHolders channel),
// failing t if none comes within within or the channel closes first.
func Signal(t testing.TB, ch <-chan struct{}, what string, within time.Duration) {
	t.Helper()
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatalf("the channel closed before %s", what)
		}
	case <-time.After(within):
		t.Fatalf("no signal within %v: %s", within, what)
	}
}

// SeenHolders waits for signals on ch (a Locker.WatchHolders channel) and
// reads l's Holders under prefix after each, until ok holds: a signal may
// be spurious, and every change must bring one, so a change ok waits for
// that brings no signal fails t (Signal). Take a signal pending from before
// the change (Drain) first.
func SeenHolders(ctx context.Context, t testing.TB, ch <-chan struct{}, l *padlock.Locker, prefix, what string, within time.Duration, ok func([]padlock.Holder) bool) {
	t.Helper()
	for {
		Signal(t, ch, what, within)
		hs, err := l.Holders(ctx, prefix)
		if err != nil {
			t.Fatalf("Holders: %v", err)
		}
		if ok(hs) {
			return
		}
	}
}

// Closed waits for ch (a Locker.WatchHolders channel) to close after what,
// taking the signals before that, failing t if it is still open within
// later.
func Closed(t testing.TB, ch <-chan struct{}, what string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("the channel did not close within %v of %s", within, what)
		}
	}
}

// Drain takes a signal pending on ch, if any, so that the next wait is
// for a later change's own.
func Drain(ch <-chan struct{}) {
	select {
	case <-ch:
	default:
	}
}
