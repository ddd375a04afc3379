package conformance

import (
	"context"
	"errors"
	"time"

	"github.com/padlock-go/padlock"
)

// testRenewal holds a lock for three TTLs: the renewal loop must keep it
// exclusive and alive the whole time.
func testRenewal(e *env) {
	a, b := e.locker(), e.locker()
	name := e.name("n")
	lk := e.lock(a, e.ctx, name)
	start := time.Now()
	end := start.Add(3 * e.ttl)
	tick := time.NewTicker(e.ttl / 4)
	defer tick.Stop()
	for time.Now().Before(end) {
		<-tick.C
		if !isOpen(lk.Done()) {
			e.Fatalf("hold lost after %v of a 3xTTL hold: %v", time.Since(start), lk.Err())
		}
		e.notAcquirable(b, e.ctx, name)
	}
	e.unlock(lk)
}

// testClientDeath kills the holder's client: another client must acquire
// within the TTL plus slack, without the holder releasing anything.
func testClientDeath(e *env) {
	k := need[Killer](e, FeatureKill)
	a, b := e.locker(), e.locker()
	name := e.name("d")
	lk := e.lock(a, e.ctx, name)
	e.injected(FeatureKill, k.Kill(e.ctx, a))
	bound := e.ttl + 5*time.Second // TTL plus slack for a loaded machine
	start := time.Now()
	lk2, err := b.Lock(e.ctx, name, padlock.WithWait(bound))
	if err != nil {
		e.Fatalf("after the holder's client died, Lock = %v (waited %v)", err, time.Since(start))
	}
	if e.caps.MonotonicTokens && lk2.Token() <= lk.Token() {
		e.Errorf("token %d after the dead holder's %d", lk2.Token(), lk.Token())
	}
	e.unlock(lk2)
}

// testDoneOnLoss cuts the holder off from the server: its Done must close
// with ErrLost before anyone else acquires, and within the TTL.
func testDoneOnLoss(e *env) {
	c := need[Cutter](e, FeatureCut)
	doneOnLoss(e, FeatureCut, c.Cut)
}

// testDoneOnSilentLoss does the same with a partition that drops packets
// and leaves connections open: the holder's client sees no error, only
// silence, and Done must still close on time.
func testDoneOnSilentLoss(e *env) {
	bh := need[Blackholer](e, FeatureBlackhole)
	doneOnLoss(e, FeatureBlackhole, bh.Blackhole)
}

func doneOnLoss(e *env, what Feature, cut func(context.Context, *padlock.Locker) (func() error, error)) {
	doneOnLossOf(e, what, cut, mutexLoss)
}

// lossCase is what doneOnLossOf loses and who takes its place: the hold
// it cuts off (hold, on Locker a), and the acquisition that must not be
// granted before that hold's Done closes (take, on Locker b). A case may
// open more Lockers (a permit's fellow holders).
type lossCase struct {
	hold func(e *env, a *padlock.Locker, name string) *padlock.Lock
	take func(e *env, b *padlock.Locker, name string, wait time.Duration) (*padlock.Lock, error)
}

// mutexLoss loses a plain Lock to another Lock.
var mutexLoss = lossCase{
	hold: func(e *env, a *padlock.Locker, name string) *padlock.Lock { return e.lock(a, e.ctx, name) },
	take: func(e *env, b *padlock.Locker, name string, wait time.Duration) (*padlock.Lock, error) {
		return b.Lock(e.ctx, name, padlock.WithWait(wait))
	},
}

// doneOnLossOf cuts the holder of c's hold off: its Done must close with
// ErrLost before c's taker is granted, and within the TTL.
//
// The rule assumes the holder's process runs: its renewal loop closes Done
// within the safety margin after the deadline. An attempt in which this
// process was not run for longer than half the margin (a ticker of its own
// fell behind that far) and saw Done still open at the regrant broke the
// assumption, not the rule; it is repeated, at most lossAttempts times in
// all, and the last must hold.
func doneOnLossOf(e *env, what Feature, cut func(context.Context, *padlock.Locker) (func() error, error), c lossCase) {
	e.Helper()
	for attempt := 1; ; attempt++ {
		stalled := lossAttempt(e, what, cut, c, attempt == lossAttempts)
		if stalled == 0 {
			return
		}
		e.Logf("attempt %d: Done was still open at the regrant, and this process was not run for %v (the safety margin of a %v lease is %v): the rule's assumption did not hold; again",
			attempt, stalled, e.ttl, padlock.SafetyMargin(e.ttl))
	}
}

// lossAttempts bounds doneOnLossOf's attempts.
const lossAttempts = 3

// lossAttempt is one attempt of doneOnLossOf. It returns how long this
// process was not run if Done was still open at the regrant and that
// excuses it (never on the last attempt, which fails instead), else 0.
func lossAttempt(e *env, what Feature, cut func(context.Context, *padlock.Locker) (func() error, error), c lossCase, last bool) time.Duration {
	e.Helper()
	a, b := e.locker(), e.locker()
	name := e.name("l")
	lk := c.hold(e, a, name)
	doneAt := make(chan time.Time, 1)
	go func() {
		select {
		case <-lk.Done():
			doneAt <- time.Now()
		case <-e.ctx.Done():
		}
	}()
	starved := watchScheduling()
	defer starved.stop()
	cutAt := time.Now()
	restore, err := cut(e.ctx, a)
	e.injected(what, err)
	defer func() {
		if err := restore(); err != nil {
			e.Errorf("restore: %v", err)
		}
	}()

	lk2, err := c.take(e, b, name, 2*e.ttl+10*time.Second)
	acquiredAt := time.Now()
	if err != nil {
		e.Fatalf("Lock after the holder was cut off: %v", err)
	}
	defer e.unlock(lk2)
	// The property itself: by the time anyone else holds the lock, the old
	// holder's Done has closed. (The channel's state is checked, not a
	// timestamp another goroutine may record late.) A backend whose locks
	// belong to a connection cannot promise it: the server frees the lock
	// as soon as it drops the connection. Its lateness is measured instead.
	if isOpen(lk.Done()) && e.caps.DoneBeforeRegrant {
		if late := starved.worst(); late > padlock.SafetyMargin(e.ttl)/2 && !last {
			select { // the hold is lost all the same: let it end before the next attempt
			case <-doneAt:
			case <-time.After(e.ttl + 10*time.Second):
				e.Fatalf("the cut-off holder's Done is still open %v after the cut", time.Since(cutAt))
			}
			return late
		}
		e.Fatalf("another client acquired %v after the cut, but the cut-off holder's Done is still open (this process was not run for at most %v)",
			acquiredAt.Sub(cutAt), starved.worst())
	}
	var closed time.Time
	select {
	case closed = <-doneAt:
	case <-time.After(e.ttl + 10*time.Second):
		e.Fatalf("the cut-off holder's Done is still open %v after the cut", time.Since(cutAt))
	}
	if !e.caps.DoneBeforeRegrant {
		e.Logf("%s: another client acquired %v after the cut; the old holder's Done closed %v after that",
			what, acquiredAt.Sub(cutAt), closed.Sub(acquiredAt))
	}
	if took := closed.Sub(cutAt); took > e.ttl+time.Second {
		e.Errorf("Done closed %v after the cut, later than the TTL %v allows", took, e.ttl)
	}
	if !errors.Is(lk.Err(), padlock.ErrLost) {
		e.Errorf("Err after loss = %v, want ErrLost", lk.Err())
	}
	if err := lk.Unlock(e.ctx); !errors.Is(err, padlock.ErrNotHeld) {
		e.Errorf("Unlock after loss = %v, want ErrNotHeld", err)
	}
	return 0
}

// testRestartWhileWaiting restarts the server under a holder and a waiter:
// the waiter must acquire once the server is back, or report the outage
// (ErrUnavailable); it must never hang or fail otherwise.
func testRestartWhileWaiting(e *env) {
	r := need[Restarter](e, FeatureRestart)
	a, b := e.locker(), e.locker()
	name := e.name("s")
	lk := e.lock(a, e.ctx, name)
	wctx, cancel := context.WithTimeout(e.ctx, 4*e.ttl+60*time.Second)
	defer cancel()
	res := make(chan error, 1)
	opt, proof := waitProof()
	go func() {
		lk, err := b.Lock(wctx, name, opt)
		if err == nil {
			err = lk.Unlock(e.ctx)
		}
		res <- err
	}()
	e.awaitWaiting(b, proof, 2)
	e.injected(FeatureRestart, r.RestartServer(e.ctx))
	if err := lk.Unlock(e.ctx); err != nil {
		e.Logf("holder's Unlock across the restart: %v", err) // allowed: it retries in the background
	}
	// The server is back: the waiter gets the lock, or reports the outage
	// it saw (ErrUnavailable). Any other error (a login refused because
	// the restarted server lost its users, say) is a failure, and so is a
	// hang.
	switch err := <-res; {
	case err == nil:
	case errors.Is(err, context.DeadlineExceeded):
		e.Fatalf("waiter hung across the server restart: %v", err)
	case errors.Is(err, padlock.ErrUnavailable):
		e.Logf("waiter reported the outage: %v", err)
	default:
		e.Fatalf("waiter across the server restart: %v; want the lock once the server is back, or ErrUnavailable", err)
	}
}
