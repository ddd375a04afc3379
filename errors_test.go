package padlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/memory"
)

// Every error padlock's API returns names padlock once, at the start, and
// still matches its sentinels. They used to repeat the prefix wherever
// one class wrapped another: "unlock "n": padlock: lock not held:
// padlock: locker closed".
func TestErrorsSayPadlockOnce(t *testing.T) {
	ctx := context.Background()
	const store = "errors-once"
	open := func(client string) *padlock.Locker {
		t.Helper()
		l, err := padlock.Open(ctx, "mem://"+store+"?client="+client, padlock.WithTTL(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	type result struct {
		what string
		err  error
		want error
	}
	var got []result
	check := func(what string, err, want error) { got = append(got, result{what, err, want}) }
	a, b := open("a"), open("b")

	_, err := padlock.Open(ctx, "nosuch://x")
	check("Open of an unknown scheme", err, padlock.ErrUnknownScheme)
	_, err = padlock.Open(ctx, "mem://x?ttl=1ms")
	check("Open with a bad ttl", err, padlock.ErrInvalidOption)
	_, err = a.Lock(ctx, "")
	check("Lock of an empty name", err, padlock.ErrInvalidName)
	_, err = a.Lock(ctx, "n", padlock.WithTTL(time.Nanosecond))
	check("Lock with a bad TTL", err, padlock.ErrInvalidOption)

	held, err := a.Lock(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.TryLock(ctx, "held")
	check("TryLock of a held name", err, padlock.ErrNotAcquired)
	_, err = b.Lock(ctx, "held", padlock.WithWait(20*time.Millisecond))
	check("Lock that timed out", err, padlock.ErrTimeout)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = b.Lock(cancelled, "held")
	check("Lock with a cancelled context", err, context.Canceled)
	_, err = b.ForceUnlock(ctx, "free")
	check("ForceUnlock of a free name", err, padlock.ErrNotHeld)

	// Unlocked twice.
	lk, err := a.Lock(ctx, "twice")
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	check("a second Unlock", lk.Unlock(ctx), padlock.ErrNotHeld)

	// Closed under a hold (the example).
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	check("Err of a hold its Locker's Close released", held.Err(), padlock.ErrClosed)
	check("Unlock after Close", held.Unlock(ctx), padlock.ErrNotHeld)
	_, err = a.Lock(ctx, "n")
	check("Lock on a closed Locker", err, padlock.ErrClosed)

	// Lost: the server forgot the hold (a restart), so the next renewal
	// hears "not held".
	lost, err := b.Lock(ctx, "lost")
	if err != nil {
		t.Fatal(err)
	}
	memory.Restart(store)
	select {
	case <-lost.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the lost hold's Done never closed")
	}
	check("Err of a lost hold", lost.Err(), padlock.ErrLost)
	check("Unlock of a lost hold", lost.Unlock(ctx), padlock.ErrNotHeld)

	// Down: the server cannot be reached.
	memory.Down(store, true)
	_, err = b.TryLock(ctx, "down")
	check("TryLock while the server is down", err, padlock.ErrUnavailable)
	memory.Down(store, false)

	for _, r := range got {
		switch msg := r.err.Error(); {
		case r.err == nil:
			t.Errorf("%s: no error", r.what)
		case !errors.Is(r.err, r.want):
			t.Errorf("%s: %v, want %v", r.what, r.err, r.want)
		case !strings.HasPrefix(msg, "padlock: ") || strings.Count(msg, "padlock:") != 1:
			t.Errorf("%s: %q: want one \"padlock: \", at the start", r.what, msg)
		default:
			t.Logf("%s: %s", r.what, msg)
		}
	}
}
