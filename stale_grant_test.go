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

// A grant whose answer comes after its lease ran out (a paused process, a
// slow network) is no grant: TryLock fails with ErrUnavailable, Lock gives
// it back and waits for a fresh one, and neither returns a lock that
// another client may hold meanwhile. (The fault suite's scenario 2 found a
// fair Redis queue handing such a grant to a paused waiter.)
func TestStaleGrantRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const store = "stale-grant"
	ttl := padlock.MinTTL
	l, err := padlock.Open(ctx, "mem://"+store+"?client=c1", padlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	memory.SlowGrants(store, "c1", 2*ttl)
	_, err = l.TryLock(ctx, "n")
	if !errors.Is(err, padlock.ErrUnavailable) || !strings.Contains(err.Error(), "lease had run out") {
		t.Fatalf("TryLock with a grant answered after its lease: %v, want ErrUnavailable saying why", err)
	}

	// A wait that ends among stale grants ends as a wait does.
	if _, err := l.Lock(ctx, "n", padlock.WithWait(3*ttl)); !errors.Is(err, padlock.ErrTimeout) {
		t.Fatalf("Lock whose wait ends among stale grants: %v, want ErrTimeout", err)
	}

	// Lock keeps waiting through stale grants until one comes in time.
	res := make(chan error, 1)
	var got *padlock.Lock
	go func() {
		var err error
		got, err = l.Lock(ctx, "n", padlock.WithWait(30*time.Second))
		res <- err
	}()
	// Lock must not return while grants keep coming too late: wait until
	// four stale grants have been answered (the call asks again only once
	// it gave the last one back), failing if it returns meanwhile.
	before := memory.SlowGranted(store, "c1")
	for memory.SlowGranted(store, "c1") < before+4 {
		select {
		case err := <-res:
			t.Fatalf("Lock returned %v while every grant came too late (%d stale grants answered)", err, memory.SlowGranted(store, "c1")-before)
		case <-ctx.Done():
			t.Fatalf("no fourth stale grant within a minute: %d answered", memory.SlowGranted(store, "c1")-before)
		case <-time.After(ttl / 4):
		}
	}
	memory.SlowGrants(store, "c1", 0)
	if err := <-res; err != nil {
		t.Fatalf("Lock once grants come in time: %v", err)
	}
	select {
	case <-got.Done():
		t.Fatalf("the lock Lock returned is lost already: %v", got.Err())
	default:
	}
	if err := got.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	conformance.WaitFor(context.Background(), t, "nothing left in the store", 10*time.Second, func() bool { return len(memory.Keys(store)) == 0 })
}

// A grant that arrives with more than a safety margin of its lease left,
// but less than one and a half (a slow answer), is kept, and renewed at
// once: its first renewal, at a third of what is left, would come after
// its deadline, where the hold would be given up without a renewal tried
// (and its Done closed late, after the deadline). Here the renewal hangs
// (the client's requests are frozen after the grant), so the hold is lost
// at its deadline; the renewal must have been sent before that.
func TestAgedGrantRenewedAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const store = "aged-grant"
	// A lease of 30s has a margin of 1.55s: the answer comes with 2.2s
	// left (less what the machine adds), between 1 and 1.5 margins, with
	// 650ms on either side: before the grant counts as stale, and for the
	// loop to send its renewal before the deadline on a busy machine.
	ttl := 30 * time.Second
	left := 2200 * time.Millisecond
	if m := padlock.SafetyMargin(ttl); left <= m || left >= m*3/2 {
		t.Fatalf("lease left %v is not between 1 and 1.5 margins (%v)", left, m)
	}
	l, err := padlock.Open(ctx, "mem://"+store+"?client=c1", padlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	memory.SlowGrants(store, "c1", ttl-left)
	for attempt := 1; ; attempt++ {
		type result struct {
			lk  *padlock.Lock
			err error
		}
		res := make(chan result, 1)
		go func() {
			lk, err := l.TryLock(ctx, "n")
			res <- result{lk, err}
		}()
		// Granted (the key is in the store), its answer on its way: every
		// request of the client from here on hangs.
		conformance.WaitFor(ctx, t, "the grant", 30*time.Second, func() bool { return len(memory.Keys(store)) > 0 })
		thaw := memory.Freeze(store, "c1")
		r := <-res
		if errors.Is(r.err, padlock.ErrUnavailable) && strings.Contains(r.err.Error(), "lease had run out") && attempt < 3 {
			// The machine held the answer past its margin: the grant is
			// refused (TestStaleGrantRefused), its give-back frozen. Again.
			thaw()
			conformance.WaitFor(ctx, t, "the refused grant given back", 30*time.Second, func() bool { return len(memory.Keys(store)) == 0 })
			continue
		}
		if r.err != nil {
			thaw()
			t.Fatalf("TryLock with %v of its lease left: %v", left, r.err)
		}
		select {
		case <-r.lk.Done():
		case <-ctx.Done():
			thaw()
			t.Fatal("the hold outlived a renewal that never answered")
		}
		stuck := memory.Stuck(store, "c1")
		thaw()
		if stuck == 0 {
			t.Fatalf("the hold was given up (%v) with no renewal sent: its first renewal was due after its deadline", r.lk.Err())
		}
		if !errors.Is(r.lk.Err(), padlock.ErrLost) {
			t.Fatalf("Err after a renewal unanswered at the deadline: %v, want ErrLost", r.lk.Err())
		}
		break
	}
	memory.SlowGrants(store, "c1", 0)
	conformance.WaitFor(context.Background(), t, "nothing left in the store", 30*time.Second, func() bool { return len(memory.Keys(store)) == 0 })
}
