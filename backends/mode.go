package backends

import (
	"context"
	"fmt"
)

// Mode is what an acquisition claims on its name. Every hold and every
// waiter on a name has a mode and a limit (Request.Limit), and one rule
// decides every grant, on every backend (the server applies it
// atomically):
//
//   - Limits agree. A request whose limit differs from that of a live hold
//     or waiter on the name fails at once, leaving nothing behind, with an
//     error matching ErrInvalidOption that names both limits. A Shared
//     request counts as limit 1.
//   - Exclusive with limit n is granted while fewer than n holds exist on
//     the name and none of them is Shared. On a FairFIFO backend it is also
//     granted only when fewer than n holds and waiters are ahead of it in
//     arrival order. With n = 1 this is the mutex: the writer side of a
//     read-write lock.
//   - Shared is granted while no Exclusive hold exists on the name; on a
//     FairFIFO backend, also only when no Exclusive waiter is ahead of it,
//     so that a waiting writer is never starved by readers that came after
//     it.
//   - Every grant's token is greater than the token of every hold on the
//     name that ended before it was granted (MonotonicTokens), whatever the
//     modes.
type Mode uint8

// Modes.
const (
	// Exclusive is a writer (a mutex), or one permit of a semaphore when
	// Request.Limit is above 1.
	Exclusive Mode = iota
	// Shared is a reader of a read-write lock: it shares the name with
	// other readers and excludes writers.
	Shared
)

// String returns "exclusive" or "shared".
func (m Mode) String() string {
	switch m {
	case Exclusive:
		return "exclusive"
	case Shared:
		return "shared"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// Sharer is implemented by holds that can turn from Exclusive (limit 1)
// into Shared in place: a writer that keeps reading after it stops
// writing (padlock's downgrade, when an owner holding both sides unlocks
// the writer side). Every driver that reports Capabilities.SharedLocks
// implements it.
type Sharer interface {
	// Share makes the hold a reader: readers waiting behind it may be
	// granted at once, writers still wait for it. The hold keeps its
	// place, its token and its lease; Share returns the lease it holds
	// now, with Renew's contract (ErrNotHeld if the hold is gone for good,
	// ErrUnavailable if the outcome is unknown). After an error other than
	// ErrNotHeld the hold may be either Exclusive or Shared on the server:
	// its Renew and Release must work in both states. The portable layer
	// never calls Share while a renewal of the hold is in flight, nor
	// renews it while Share runs.
	Share(ctx context.Context) (Grant, error)
}
