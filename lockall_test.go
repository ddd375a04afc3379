package padlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/memory"
)

// LockAll is all or none even when a name it took first is lost while it
// waits for another: here the first name's renewals hang (memory.Freeze)
// until its lease runs out, while the second is held by someone else.
// When the second comes free, LockAll must not hand back the lost hold
// beside it: it gives the second back and reports the loss, and nothing
// of the call is left held. (A fault-suite rehearsal saw LockAll hand
// back such a hold, with the name already granted to another client.)
func TestLockAllLosesAnEarlyName(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const store = "lockall-lost"
	open := func(id string, opts ...padlock.OpenOption) *padlock.Locker {
		l, err := padlock.Open(ctx, "mem://"+store+"?client="+id, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	a, b := open("a", padlock.WithTTL(time.Second)), open("b")
	second, err := b.Lock(ctx, "z-second")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		locks []*padlock.Lock
		err   error
	}
	done := make(chan result, 1)
	go func() {
		locks, err := a.LockAll(ctx, []string{"a-first", "z-second"})
		done <- result{locks, err}
	}()
	conformance.WaitFor(ctx, t, "LockAll holding the first name and waiting for the second", 30*time.Second, func() bool {
		first, err := b.Holders(ctx, "a-first")
		if err != nil || len(first) != 1 {
			return false
		}
		hs, err := b.Holders(ctx, "z-second")
		return err == nil && len(hs) == 1 && hs[0].Waiters == 1
	})
	thaw := memory.Freeze(store, "a")
	defer thaw()
	// The store lets the first name go once its lease runs out; a's Done
	// for it closed before that, at its deadline.
	conformance.WaitFor(ctx, t, "the first name's lease run out", 30*time.Second, func() bool {
		hs, err := b.Holders(ctx, "a-first")
		return err == nil && len(hs) == 0
	})
	thaw()
	if err := second.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if !errors.Is(r.err, padlock.ErrLost) || r.locks != nil {
		t.Fatalf("LockAll after its first name was lost = %v, %v; want no locks and ErrLost", r.locks, r.err)
	}
	conformance.WaitFor(ctx, t, "nothing of the call left held", 30*time.Second, func() bool { return len(memory.Keys(store)) == 0 })
}

// noCancelDriver grants every request, and records whether each was
// marked NoCancel: a request that nothing but the Locker's closing ends.
type noCancelDriver struct {
	mu       sync.Mutex
	noCancel map[string]bool
}

func (d *noCancelDriver) Acquire(_ context.Context, req backends.Request) (backends.Hold, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.noCancel[req.Name] = req.NoCancel
	return &alwaysHold{ttl: req.TTL, sent: time.Now()}, nil
}
func (d *noCancelDriver) Capabilities() backends.Capabilities {
	return backends.Capabilities{Consistency: backends.CP, MinTTL: time.Millisecond}
}
func (d *noCancelDriver) Close(context.Context) error { return nil }

// A LockAll bounded by WithWait acquires its names one by one with no wait
// bound of their own, yet the call's bound applies to each: none is marked
// NoCancel, which lets a driver wait for its answer past any bound (etcd
// sends its put detached and waits for it then). A plain Lock with no
// deadline and no WithWait still is.
func TestLockAllWithWaitIsNoNoCancel(t *testing.T) {
	drv := &noCancelDriver{noCancel: map[string]bool{}}
	l, err := padlock.NewLocker(drv, padlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	locks, err := l.LockAll(ctx, []string{"all/a", "all/b"}, padlock.WithWait(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	padlock.UnlockAll(ctx, locks)
	lk, err := l.Lock(ctx, "plain")
	if err != nil {
		t.Fatal(err)
	}
	lk.Unlock(ctx)
	drv.mu.Lock()
	defer drv.mu.Unlock()
	if drv.noCancel["all/a"] || drv.noCancel["all/b"] {
		t.Errorf("LockAll with WithWait marked its names NoCancel: %v", drv.noCancel)
	}
	if !drv.noCancel["plain"] {
		t.Error("a Lock with no deadline and no WithWait is not NoCancel")
	}
}
