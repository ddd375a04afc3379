package conformance

import (
	"context"
	"sync"
	"time"

	"github.com/padlock-go/padlock"
)

// WaitCounter is implemented by harnesses that can count, on the server,
// the clients waiting for a lock where waiting leaves no queue entry (a
// Redis client's pub/sub subscription to a name's wake-ups). The suite
// uses it to prove that a Lock call it is about to cancel or close is
// waiting, not still on its way; backends that poll prove it themselves
// (see waitProof), and those with a queue by their queue entries.
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
// clients (clients: how many Lockers wait now, this one included), or by
// its first back-off where it polls. With a WaitCounter it fails the test
// if nothing shows it within 30s: a check that could not see the waiter
// cannot tell a waiter aborted from one that never started. Without one,
// a backend that neither queues nor polls (one that blocks on the server,
// or waits for a notification) cannot show it: after proofGrace the test
// goes on unproven, and says so in its log.
func (e *env) awaitWaiting(p *proofRetry, entries, clients int) {
	e.Helper()
	if e.caps.FairFIFO {
		e.stateLen(entries)
		return
	}
	wc, counts := e.h.(WaitCounter)
	bound := proofGrace
	if counts {
		bound = 30 * time.Second
	}
	deadline := time.NewTimer(bound)
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
			if !counts {
				e.Logf("cannot show that the Lock call is waiting (it asked for no back-off, and the harness counts no waiters): going on unproven")
				return
			}
			e.Fatalf("no sign within %v that the Lock call is waiting (no back-off asked, fewer than %d waiters counted on the server)", bound, clients)
		case <-tick.C:
		case <-e.ctx.Done():
			e.Fatalf("waiting for a Lock call to wait: %v", e.ctx.Err())
		}
	}
}

// proofGrace is how long a Lock call without any means of proof is given
// to show that it waits.
const proofGrace = 2 * time.Second
