package conformance

import (
	"errors"
	"time"

	"github.com/padlock-go/padlock"
)

// renewalsToSee is how many renewal periods MinTTL wants a hold at the
// shortest TTL to outlive, and minTTLTries how many holds may try.
const (
	renewalsToSee = 4
	minTTLTries   = 10
)

// testMinTTL checks Capabilities.MinTTL: it is never below padlock.MinTTL
// (below which WithTTL refuses a TTL), a TTL just under padlock.MinTTL is
// refused, and the shortest TTL the backend reports works: a hold with it
// excludes others and its renewals keep it past its first lease (for
// renewalsToSee renewal periods, a third of the TTL each). A hold
// that short may still be lost on a loaded machine (a renewal late by a
// few dozen milliseconds, a ZooKeeper session that times out): the check
// tries up to minTTLTries holds and wants one to last, and a lost one
// must have been lost by the rules (Done closed with ErrLost before
// anyone else held the name).
func testMinTTL(e *env) {
	a, b := e.locker(), e.locker()
	min := e.caps.MinTTL
	if min < padlock.MinTTL {
		e.Fatalf("Capabilities().MinTTL = %v, below padlock.MinTTL (%v), the shortest TTL WithTTL accepts", min, padlock.MinTTL)
	}
	if _, err := a.Lock(e.ctx, e.name("short"), padlock.WithTTL(padlock.MinTTL-time.Millisecond)); !errors.Is(err, padlock.ErrInvalidOption) {
		e.Fatalf("Lock with a TTL under padlock.MinTTL = %v, want ErrInvalidOption", err)
	}
	name := e.name("m")
	for try := 1; ; try++ {
		why := holdAtMinTTL(e, a, b, name, min)
		if why == nil {
			return
		}
		if try == minTTLTries {
			e.Fatalf("in %d tries no hold with the shortest TTL (%v) outlived %d renewal periods: %v", try, min, renewalsToSee, why)
		}
		e.Logf("try %d with the shortest TTL (%v): %v", try, min, why)
	}
}

// holdAtMinTTL takes name on a with the TTL min and watches it for
// renewalsToSee renewal periods, b trying to take it meanwhile. It
// returns nil if the hold lasted, and why not if the acquisition found
// the server unavailable or the hold was lost by the rules; it fails the
// test if the rules were broken.
func holdAtMinTTL(e *env, a, b *padlock.Locker, name string, min time.Duration) error {
	e.Helper()
	lk, err := a.Lock(e.ctx, name, padlock.WithTTL(min))
	if errors.Is(err, padlock.ErrUnavailable) {
		return err // a short session may not survive a loaded machine's pause
	}
	if err != nil {
		e.Fatalf("Lock with the shortest TTL (%v): %v", min, err)
	}
	end := time.Now().Add(renewalsToSee * min / 3)
	pace := time.NewTicker(min / 6)
	defer pace.Stop()
	for time.Now().Before(end) {
		<-pace.C
		other, err := b.TryLock(e.ctx, name)
		switch {
		case err == nil && isOpen(lk.Done()) && e.caps.DoneBeforeRegrant:
			other.Unlock(e.ctx)
			e.Fatalf("TryLock succeeded while a hold with the shortest TTL (%v) was live", min)
		case err == nil:
			other.Unlock(e.ctx)
			return lostByTheRules(e, lk, min)
		case !errors.Is(err, padlock.ErrNotAcquired):
			e.Fatalf("TryLock of a name held with the shortest TTL: %v, want ErrNotAcquired", err)
		case !isOpen(lk.Done()):
			return lostByTheRules(e, lk, min)
		}
	}
	// It outlived the window; a loss just after it is no failure.
	if err := lk.Unlock(e.ctx); err != nil && !errors.Is(lk.Err(), padlock.ErrLost) {
		e.Fatalf("Unlock of a hold with the shortest TTL (%v): %v", min, err)
	}
	return nil
}

// lostByTheRules checks that a lost hold's Done closed (at once, unless
// the backend says Done may come after a regrant) with ErrLost, and
// returns that error.
func lostByTheRules(e *env, lk *padlock.Lock, min time.Duration) error {
	e.Helper()
	select {
	case <-lk.Done():
	case <-time.After(min + 10*time.Second):
		e.Fatalf("a hold with the shortest TTL (%v) is held by another client, and its Done is still open", min)
	}
	if !errors.Is(lk.Err(), padlock.ErrLost) {
		e.Fatalf("a hold with the shortest TTL (%v) ended with %v, want ErrLost", min, lk.Err())
	}
	lk.Unlock(e.ctx) // ErrNotHeld: the hold is gone
	return lk.Err()
}
