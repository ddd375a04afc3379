package conformance

import (
	"context"
	"sync"
	"time"

	"github.com/padlock-go/padlock"
)

// WaitCounter is implemented by harnesses that can count, on the server,
// the Lockers waiting for locks where waiting leaves no queue entry (a
// Redis client's pub/sub subscription to a name's wake-ups, a PostgreSQL
// client's listening connection). The suite uses it to prove that a Lock
// call it is about to cancel or close is waiting, not still on its way;
// backends that poll prove it themselves (see waitProof), and those with a
// queue by their queue entries.
type WaitCounter interface {
	Waiting(ctx context.Context) (int, error)
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
	p := &proofRetry{Retry: padlock.DefaultRetry, waiting: make(chan struct{})}
	return padlock.WithRetry(p), p
}

// awaitWaiting waits until a Lock call given p's option is shown to be
// waiting behind a holder: by its queue entry where the backend queues
// (entries: the server's entries then), by the harness's count of waiting
// Lockers (clients: how many wait now, this one included), or by its
// first back-off where it polls. It fails the test if nothing shows it
// within 30s: a check that could not see the waiter cannot tell a waiter
// aborted from one that never started. Every backend of this project has
// one of the three; a harness for a backend that waits by notification
// without a server-side queue must implement WaitCounter.
func (e *env) awaitWaiting(p *proofRetry, entries, clients int) {
	e.Helper()
	if e.caps.FairFIFO {
		e.stateLen(entries)
		return
	}
	wc, counts := e.h.(WaitCounter)
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if counts {
			if n, err := wc.Waiting(e.ctx); err == nil && n >= clients {
				return
			}
		}
		select {
		case <-p.waiting:
			return
		case <-deadline.C:
			e.Fatalf("no sign within 30s that the Lock call is waiting (no back-off asked, fewer than %d waiters counted on the server)", clients)
		case <-tick.C:
		case <-e.ctx.Done():
			e.Fatalf("waiting for a Lock call to wait: %v", e.ctx.Err())
		}
	}
}
