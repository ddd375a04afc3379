package padlock

import (
	"context"

	"github.com/padlock-go/padlock/backends"
)

// RLock blocks until it holds the read side of the read-write lock called
// name: readers share a name, and Lock and TryLock are its writer side,
// which excludes readers and writers alike. On a FairFIFO backend a waiting
// writer blocks the readers that come after it, so writers never starve.
// It waits, and fails, as Lock does.
//
// Each reader is a hold of its own, with its own lease, renewal, Done and
// fencing token, greater than the token of every hold on the name that
// ended before it was granted (where MonotonicTokens): a reader's token
// fences it against the writes of earlier writers.
//
// With an owner (WithOwner), an owner that holds the write side gets a
// read handle on its writer's hold; when it unlocks its last write handle
// while read handles remain, its hold turns into a reader in place (other
// readers may then enter). An owner that holds only the read side gets
// ErrUpgrade from Lock and TryLock. RLock with WithLimit above 1 is
// ErrInvalidOption. See docs/readwrite.md.
func (l *Locker) RLock(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	if ctx == nil {
		panic("padlock: RLock called with a nil Context")
	}
	return l.acquireTraced(ctx, "RLock", name, true, backends.Shared, opts)
}

// TryRLock makes one attempt at the read side of the read-write lock
// called name, and never waits: while a writer holds the name (or, on a
// FairFIFO backend, waits for it) it returns an error matching
// ErrNotAcquired. Otherwise it behaves as RLock.
func (l *Locker) TryRLock(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	if ctx == nil {
		panic("padlock: TryRLock called with a nil Context")
	}
	return l.acquireTraced(ctx, "TryRLock", name, false, backends.Shared, opts)
}
