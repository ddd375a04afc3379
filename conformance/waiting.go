package conformance

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/padlock-go/padlock"
)

// WaitWitness is implemented by harnesses that can see on the server that
// a Locker has begun to wait for a held lock, where waiting leaves no
// queue entry: a Redis client's pub/sub subscription to the name's
// wake-up channel, a PostgreSQL client's listening connection. The suite
// uses it to prove that a Lock call it is about to cancel, time out,
// close or wake is waiting, not still on its way; backends that poll prove
// it by their first back-off (see waitProof), and those with a queue by
// their queue entries.
type WaitWitness interface {
	// Waiting reports whether l shows on the server that it waits for a
	// lock. The suite asks only about a Locker that has not waited before
	// in the subtest, so a sign that lasts until Close (a listener kept
	// for the next wait) proves it too.
	Waiting(ctx context.Context, l *padlock.Locker) (bool, error)
}

// proofRetry passes a Retry on, and closes waiting at its first back-off:
// a polling backend asks for one after an attempt that found the lock
// held, so from then on its Lock is waiting.
type proofRetry struct {
	padlock.Retry
	once    sync.Once
	waiting chan struct{}
}

func (p *proofRetry) NextBackoff(attempt int) time.Duration {
	p.once.Do(func() { close(p.waiting) })
	return p.Retry.NextBackoff(attempt)
}

// waitProof returns a Lock option and what proves the Lock given it is
// waiting.
func waitProof() (padlock.Option, *proofRetry) {
	return slowWaitProof(padlock.DefaultRetry)
}

// slowWaitProof is waitProof over the schedule r.
func slowWaitProof(r padlock.Retry) (padlock.Option, *proofRetry) {
	p := &proofRetry{Retry: r, waiting: make(chan struct{})}
	return padlock.WithRetry(p), p
}

// proofWithin is how long a check looks for a sign that a Lock call is
// waiting before it fails.
const proofWithin = 30 * time.Second

// awaitWaiting waits until a Lock call of l, given p's option, is shown to
// be waiting behind a holder (see seenWaiting), or fails the test after
// proofWithin: a check that could not see the waiter cannot tell a
// waiter aborted from one that never started.
func (e *env) awaitWaiting(l *padlock.Locker, p *proofRetry, entries int) {
	e.Helper()
	if !e.seenWaiting(l, p, entries, nil) {
		e.Fatal("the Lock call returned before it was seen waiting")
	}
}

// seenWaiting watches for proof that a Lock call of l, given p's option,
// waits behind a holder: its queue entry where the backend queues
// (entries: the server's entries then), the harness's WaitWitness, or
// its first back-off where it polls. It returns true once it sees one,
// and false if returned (nil: the call does not return by itself) closes
// first with no sign that outlived the call. It fails the test if nothing
// shows within proofWithin. Every backend of this project has one of the
// three; a harness for a backend that waits by notification without a
// server-side queue must implement WaitWitness.
func (e *env) seenWaiting(l *padlock.Locker, p *proofRetry, entries int, returned <-chan struct{}) bool {
	e.Helper()
	ww, witness := e.h.(WaitWitness)
	seen := func() bool {
		select {
		case <-p.waiting:
			return true
		default:
		}
		if e.caps.FairFIFO {
			return len(e.state()) == entries
		}
		if !witness {
			return false
		}
		ok, err := ww.Waiting(e.ctx, l)
		if err != nil {
			e.Fatalf("WaitWitness: %v", err)
		}
		return ok
	}
	deadline := time.NewTimer(proofWithin)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if seen() {
			return true
		}
		select {
		case <-returned:
			return seen() // a last look: a back-off, say, outlives the call
		case <-p.waiting:
			return true
		case <-deadline.C:
			var found string
			if e.caps.FairFIFO {
				found = fmt.Sprintf("; the server's entries, %d wanted: %q", entries, e.state())
			}
			e.Fatalf("no sign within %v that the Lock call is waiting (no queue entry, no back-off asked, no wait seen by a WaitWitness)%s", proofWithin, found)
		case <-tick.C:
		case <-e.ctx.Done():
			e.Fatalf("waiting for a Lock call to wait: %v", e.ctx.Err())
		}
	}
}
