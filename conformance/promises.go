package conformance

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/padlock-go/padlock"
)

// slowRetry is the polling schedule PushWakeup gives its waiter: an
// attempt a minute. A backend that polls on the caller's schedule grants
// no sooner than a minute after the waiter's first back-off.
const slowRetry = time.Minute

// pushBound is how soon after the release PushWakeup wants the waiter to
// hold the lock: half the slow schedule. It is no speed claim (a pushed
// wake-up takes a few round trips; docs/benchmarks.md measures them),
// only a bound that a waiter left to the slow schedule cannot meet and a
// pushed one meets on a loaded machine by a wide margin.
const pushBound = slowRetry / 2

// testPushWakeup checks Capabilities.PushWakeup: a waiter whose polling
// schedule is an attempt a minute holds the lock well within that minute
// of the release, because the server woke it. The holder's lease is
// longer than the schedule too, so that a waiter that only looked again
// when the holder's lease ran out would miss the bound as well. Where a
// backend keeps a backstop poll of its own, faster than the bound (a
// RedLock waiter's jittered retry; a PostgreSQL advisory waiter's poll
// for holders whose connection died), the check bounds the grant but
// cannot tell the push from the backstop.
func testPushWakeup(e *env) {
	a := e.locker()
	if !e.caps.PushWakeup {
		e.Skip("backend does not push wake-ups (Capabilities.PushWakeup is false): waiters poll on WithRetry's schedule")
	}
	b := e.locker()
	name := e.name("p")
	long := padlock.WithTTL(max(e.ttl, 2*slowRetry))
	lk := e.lock(a, e.ctx, name, long)
	opt, proof := slowWaitProof(padlock.LinearBackoff(slowRetry))
	type result struct {
		lk  *padlock.Lock
		at  time.Time
		err error
	}
	res := make(chan result, 1)
	go func() {
		lk, err := b.Lock(e.ctx, name, opt, long)
		res <- result{lk, time.Now(), err}
	}()
	e.awaitWaiting(b, proof, 2)
	released := time.Now()
	e.unlock(lk)
	var r result
	select {
	case r = <-res:
	case <-time.After(2 * slowRetry):
		e.Fatalf("the waiter still waits %v after the release", 2*slowRetry)
	}
	if r.err != nil {
		e.Fatalf("waiter: %v", r.err)
	}
	defer e.unlock(r.lk)
	took := r.at.Sub(released)
	if took > pushBound {
		e.Fatalf("the waiter held the lock %v after the release, past the %v bound that its own schedule (an attempt every %v) cannot meet: nothing pushed the wake-up", took, pushBound, slowRetry)
	}
	e.Logf("waiter held the lock %v after the release (its own schedule: an attempt every %v)", took.Round(time.Millisecond), slowRetry)
}

// renewalsToSee is how many renewal periods MinTTL wants a hold at the
// shortest TTL to outlive; holds try until one does, at least minTTLTries
// of them and for at least minTTLPatience (a burst of load on a 2-core
// machine can sink ten tries of half a second each in a row: seen in CI
// on ZooKeeper's 400ms sessions at a load average of 17).
const (
	renewalsToSee  = 4
	minTTLTries    = 10
	minTTLPatience = 45 * time.Second
)

// testMinTTL checks Capabilities.MinTTL: it is never below padlock.MinTTL
// (below which WithTTL refuses a TTL), a TTL just under padlock.MinTTL is
// refused, and the shortest TTL the backend reports works: a hold with it
// excludes others and its renewals keep it past its first lease (for
// renewalsToSee renewal periods, a third of the TTL each). A hold
// that short may still be lost on a loaded machine (a renewal late by a
// few dozen milliseconds, a ZooKeeper session that times out): the check
// tries holds until one lasts (giving up after minTTLTries tries and
// minTTLPatience, whichever comes later), and a lost one must have been
// lost by the rules (Done closed with ErrLost before anyone else held the
// name).
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
	start := time.Now()
	for try := 1; ; try++ {
		why := holdAtMinTTL(e, a, b, name, min)
		if why == nil {
			return
		}
		if try >= minTTLTries && time.Since(start) >= minTTLPatience {
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
	starved := watchScheduling()
	defer starved.stop()
	for time.Now().Before(end) {
		<-pace.C
		other, err := b.TryLock(e.ctx, name)
		switch {
		case err == nil && isOpen(lk.Done()) && e.caps.DoneBeforeRegrant:
			other.Unlock(e.ctx)
			// The rule assumes the holder's process runs: its renewal loop
			// closes Done within the safety margin's allowance after the
			// deadline. A process the machine did not run for longer than
			// that (seen by a ticker of this process falling behind) broke
			// the assumption, not the rule: try again.
			if late := starved.worst(); late > padlock.SafetyMargin(min)/2 {
				return fmt.Errorf("this process was not run for %v (the safety margin of a %v lease is %v): the rule's assumption did not hold", late, min, padlock.SafetyMargin(min))
			}
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
	// It outlived the window; a loss just after it is no failure, whether
	// Done closed before the Unlock (ErrLost), the Unlock came first and
	// found the lease run out (ErrNotHeld: on a loaded machine the renewal
	// loop may not have run since the deadline passed), or the session
	// ended as the Unlock was sent (ErrUnavailable: a ZooKeeper session of
	// the shortest TTL, seen in CI), provided the name then comes free:
	// the release goes on in the background, or the hold goes with its
	// session. The window's TryLocks checked that nobody else held the
	// name while Done was open.
	uerr := lk.Unlock(e.ctx)
	switch {
	case uerr == nil, errors.Is(lk.Err(), padlock.ErrLost), errors.Is(uerr, padlock.ErrNotHeld):
	case errors.Is(uerr, padlock.ErrUnavailable):
		other, err := b.Lock(e.ctx, name, padlock.WithWait(freeWithin))
		if err != nil {
			e.Fatalf("after an Unlock of a hold with the shortest TTL (%v) that found the server unavailable (%v), the name was not free within %v: %v", min, uerr, freeWithin, err)
		}
		e.unlock(other)
	default:
		e.Fatalf("Unlock of a hold with the shortest TTL (%v): %v", min, uerr)
	}
	return nil
}

// freeWithin bounds how long a name held with the shortest TTL may stay
// taken after an Unlock that found the server unavailable: its lease, a
// loaded machine's background release, and slack.
const freeWithin = 30 * time.Second

// schedulingWatch measures how late this process runs: a ticker's worst
// lateness since it started.
type schedulingWatch struct {
	stop  func()
	worst func() time.Duration
}

// watchScheduling starts a schedulingWatch; stop ends it.
func watchScheduling() schedulingWatch {
	const every = 5 * time.Millisecond
	var (
		mu    sync.Mutex
		worst time.Duration
	)
	done := make(chan struct{})
	t := time.NewTicker(every)
	go func() {
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				now := time.Now() // when this goroutine ran, not when the tick was due
				mu.Lock()
				worst = max(worst, now.Sub(last)-every)
				mu.Unlock()
				last = now
			}
		}
	}()
	return schedulingWatch{
		stop: func() { close(done) },
		worst: func() time.Duration {
			mu.Lock()
			defer mu.Unlock()
			return worst
		},
	}
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

// testFencingSurvivesFailover checks Capabilities.FencingSurvivesFailover
// where the harness can fail the server over: a holder after the
// failover gets a token above every one granted before it.
func testFencingSurvivesFailover(e *env) {
	a := e.locker()
	if !e.caps.FencingSurvivesFailover {
		e.Skip("backend does not promise that fencing survives a failover")
	}
	f := need[Failoverer](e, FeatureFailover)
	name := e.name("f")
	var before uint64
	for range 3 {
		lk := e.lock(a, e.ctx, name)
		before = max(before, lk.Token())
		e.unlock(lk)
	}
	e.injected(FeatureFailover, f.Failover(e.ctx))
	b := e.locker()
	lk, err := b.Lock(e.ctx, name, padlock.WithWait(outageBound))
	if err != nil {
		e.Fatalf("Lock after the failover: %v", err)
	}
	defer e.unlock(lk)
	if lk.Token() <= before {
		e.Fatalf("token %d after the failover, not above %d granted before it", lk.Token(), before)
	}
}
