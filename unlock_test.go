package padlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/memory"
)

// Unlock honours its context while a renewal hangs: it returns when its
// context ends, not at the lease deadline, with an error that says the
// backend did not answer; the release follows in the background once the
// renewal returns, and nothing is left behind.
func TestUnlockDuringHangingRenewal(t *testing.T) {
	ctx := context.Background()
	const store, ttl = "hanging-renewal", 6 * time.Second
	lk, thaw := holdWithHangingRenewal(t, store, ttl)
	uctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := lk.Unlock(uctx)
	took := time.Since(start)
	if !errors.Is(err, padlock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Unlock during a hanging renewal = %v, want ErrUnavailable and context.DeadlineExceeded", err)
	}
	// The lease deadline is over three seconds away: returning well before it
	// means Unlock did not wait for it.
	if took > ttl/2 {
		t.Errorf("Unlock with a 50ms context took %v: it waited for the renewal", took)
	}
	if isOpen(lk.Done()) || lk.Err() != nil {
		t.Errorf("after Unlock: Done open %v, Err %v; want closed with nil", isOpen(lk.Done()), lk.Err())
	}
	// A release that overlapped the renewal would hang on the freeze too.
	if n := memory.Stuck(store, "c1"); n != 1 {
		t.Fatalf("%d requests in flight after Unlock, want only the renewal", n)
	}
	thaw()
	conformance.WaitFor(context.Background(), t, "the background release", 10*time.Second, func() bool { return len(memory.Keys(store)) == 0 })
}

func isOpen(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

// Error messages name the lock once: the name is added where the call is
// classified, never again by the layers below.
func TestErrorsNameTheLockOnce(t *testing.T) {
	ctx := context.Background()
	const store = "names-once"
	l, err := padlock.Open(ctx, "mem://"+store+"?client=c1", padlock.WithTTL(padlock.MinTTL))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	other, err := padlock.Open(ctx, "mem://"+store+"?client=c2")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	lk, err := l.Lock(ctx, "n/58")
	if err != nil {
		t.Fatal(err)
	}
	_, terr := other.Lock(ctx, "n/58", padlock.WithWait(10*time.Millisecond))
	_, nerr := other.TryLock(ctx, "n/58")
	memory.Cut(store, "c1", true) // the hold is lost at its deadline
	defer memory.Cut(store, "c1", false)
	<-lk.Done()
	uerr := lk.Unlock(ctx)
	for _, err := range []error{terr, nerr, uerr} {
		if err == nil {
			t.Fatal("expected an error")
		}
		if n := strings.Count(err.Error(), `"n/58"`); n != 1 {
			t.Errorf("%q names the lock %d times, want once", err, n)
		}
	}
	if !errors.Is(uerr, padlock.ErrNotHeld) || !errors.Is(uerr, padlock.ErrLost) {
		t.Errorf("Unlock after loss = %v, want ErrNotHeld and ErrLost", uerr)
	}
}

// Unlock with no deadline of its own still bounds its wait for a renewal
// that hangs: DefaultRequestTimeout, then ErrUnavailable and the release
// in the background.
func TestUnlockBoundsItsOwnWait(t *testing.T) {
	ctx := context.Background()
	const store, ttl = "unlock-own-bound", 9 * time.Second
	lk, thaw := holdWithHangingRenewal(t, store, ttl)
	start := time.Now()
	err := lk.Unlock(ctx) // context.Background: no bound but padlock's own
	took := time.Since(start)
	if !errors.Is(err, padlock.ErrUnavailable) {
		t.Errorf("Unlock during a hanging renewal = %v, want ErrUnavailable", err)
	}
	// The hung renewal's own deadline is more than 5s away (the lease
	// deadline); padlock's bound is 5s, and that is what must end the wait.
	if took > padlock.DefaultRequestTimeout+3*time.Second {
		t.Errorf("Unlock took %v, beyond its own bound of %v", took, padlock.DefaultRequestTimeout)
	}
	thaw()
	conformance.WaitFor(context.Background(), t, "the background release", 10*time.Second, func() bool { return len(memory.Keys(store)) == 0 })
}

// CloseContext is bounded by its context even while a driver call ignores
// its own: a Lock whose requests hang cannot hold Close up.
func TestCloseBoundedWhileAcquireHangs(t *testing.T) {
	ctx := context.Background()
	const store = "close-bounded"
	l, err := padlock.Open(ctx, "mem://"+store+"?client=c1")
	if err != nil {
		t.Fatal(err)
	}
	thaw := memory.Freeze(store, "c1")
	res := make(chan error, 1)
	go func() {
		_, err := l.Lock(ctx, "n")
		res <- err
	}()
	conformance.WaitFor(context.Background(), t, "the Lock's request hanging", 10*time.Second, func() bool { return memory.Stuck(store, "c1") == 1 })
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	l.CloseContext(cctx)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("CloseContext with a 200ms context took %v", took)
	}
	thaw()
	if err := <-res; !errors.Is(err, padlock.ErrClosed) {
		t.Errorf("the hanging Lock, after Close = %v, want ErrClosed", err)
	}
	conformance.WaitFor(context.Background(), t, "nothing left", 10*time.Second, func() bool { return len(memory.Keys(store)) == 0 })
}

// holdWithHangingRenewal holds a lock on mem://store with ttl and returns
// once its renewal (at TTL/3) is in flight and hangs, ignoring its context,
// until thaw is called. The Locker closes when the test ends.
func holdWithHangingRenewal(t *testing.T, store string, ttl time.Duration) (lk *padlock.Lock, thaw func()) {
	t.Helper()
	ctx := context.Background()
	l, err := padlock.Open(ctx, "mem://"+store+"?client=c1", padlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if lk, err = l.Lock(ctx, "n"); err != nil {
		t.Fatal(err)
	}
	thaw = memory.Freeze(store, "c1")
	t.Cleanup(thaw)
	conformance.WaitFor(context.Background(), t, "a renewal in flight", ttl, func() bool { return memory.Stuck(store, "c1") == 1 })
	return lk, thaw
}
