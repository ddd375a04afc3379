package padlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// lockAllAtOnce is LockAll's first try on a driver that can take several
// names in one request (backends.MultiAcquirer): the whole set in one
// request, which grants every name or none and never waits. Each hold it
// returns is published and started exactly as acquireFromDriver does a
// single one.
//
// It reports ok false, having taken nothing and left nothing, when LockAll
// must take the names one by one instead, within the same bound: the
// call does not qualify (one name, a limit, an owner that holds or is
// acquiring one of the names: that is reentrancy, per name), the driver
// declines this set (ErrUnsupported), someone else holds or waits for one
// of the names (ErrNotAcquired: LockAll always waits, so the per-name path
// does), or a grant came after its lease had run out. Any other failure
// is the call's answer (ok true, with the error).
func (l *Locker) lockAllAtOnce(ctx, actx context.Context, names []string, order []int, s settings) (_ []*Lock, ok bool, _ error) {
	ma, can := l.drv.(backends.MultiAcquirer)
	if !can || len(names) < 2 || s.limit != 1 || s.elect || actx.Err() != nil {
		return nil, false, nil
	}
	owner := ownerFrom(ctx)
	var reserved []chan struct{}
	if owner != "" {
		if reserved = l.reserveAll(owner, names); reserved == nil {
			return nil, false, nil
		}
		// Settles what a failure left reserved; a reservation settled
		// with its hold below is left alone.
		defer func() {
			for i, ch := range reserved {
				l.settle(ownedKey{owner, names[i]}, ch, nil)
			}
		}()
	}
	reqs := make([]backends.Request, len(order))
	for k, i := range order {
		reqs[k] = backends.Request{Name: names[i], TTL: s.ttl, Retry: s.retry, Owner: owner,
			Mode: backends.Exclusive, Limit: 1}
	}
	first := names[order[0]]
	start := time.Now()
	// One attempt that never waits for a holder: bounded as a TryLock is.
	rctx, cancel := driverkit.WithRequestTimeout(actx, 0)
	defer cancel()
	dhs, err := ma.AcquireAll(rctx, reqs)
	switch {
	case errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrUnsupported):
		return nil, false, nil
	case err != nil:
		return nil, true, l.lockAllFailed(ctx, first, start, l.acquireError(rctx, first, start, err))
	case len(dhs) != len(reqs) || slices.Contains(dhs, nil):
		l.giveBackAll(dhs)
		err := fmt.Errorf("lock %q: %w: driver returned %d holds for %d names", first, ErrUnavailable, len(dhs), len(reqs))
		return nil, true, l.lockAllFailed(ctx, first, start, err)
	}
	for k, dh := range dhs {
		if !time.Now().Before(dh.Grant().Deadline()) {
			// As in acquireFromDriver: no grant. The per-name path waits
			// again, within the call's bound.
			l.giveBackAll(dhs)
			l.log.Warn("padlock: a grant came after its lease had run out; given back",
				"lock", names[order[k]], "token", dh.Token(), "lease", dh.Grant().TTL, "late", time.Since(dh.Grant().Deadline()))
			return nil, false, nil
		}
	}
	held := make([]*Lock, len(names))
	hs := make([]*hold, len(dhs))
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.giveBackAll(dhs)
		return nil, true, l.lockAllFailed(ctx, first, start, fmt.Errorf("lock %q: %w", first, ErrClosed))
	}
	for k, i := range order {
		hs[k], held[i] = l.publishLocked(actx, names[i], owner, dhs[k], backends.Exclusive, 1)
		if owner != "" {
			l.settleLocked(ownedKey{owner, names[i]}, reserved[i], hs[k])
		}
	}
	l.mu.Unlock()
	for k, i := range order {
		l.start(actx, hs[k])
		sctx, span := l.tel.startAcquire(ctx, "LockAll", names[i])
		l.tel.endAcquire(sctx, span, "LockAll", start, held[i], nil)
	}
	return held, true, nil
}

// lockAllFailed records a failed one-request LockAll as the per-name path
// records the name it failed on (here the first in canonical order), and
// returns err.
func (l *Locker) lockAllFailed(ctx context.Context, name string, start time.Time, err error) error {
	sctx, span := l.tel.startAcquire(ctx, "LockAll", name)
	l.tel.endAcquire(sctx, span, "LockAll", start, nil, tidy(err))
	return err
}

// reserveAll reserves every name for owner, as joinOwned reserves one for
// the call that acquires it, so that the owner's other calls on these
// names wait for this one. It reserves none, and returns nil, if the owner
// holds or is acquiring any of them already, or the Locker is closed.
func (l *Locker) reserveAll(owner string, names []string) []chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	for _, n := range names {
		k := ownedKey{owner, n}
		if l.owned[k] != nil || l.pending[k] != nil {
			return nil
		}
	}
	chs := make([]chan struct{}, len(names))
	for i, n := range names {
		chs[i] = make(chan struct{})
		l.pending[ownedKey{owner, n}] = chs[i]
	}
	return chs
}

// giveBackAll gives back every hold of a one-request grant that did not
// become the Locker's.
func (l *Locker) giveBackAll(dhs []backends.Hold) {
	for _, dh := range dhs {
		if dh != nil {
			l.giveBack(dh)
		}
	}
}
