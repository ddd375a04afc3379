package padlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// Lock blocks until it holds the lock called name, ctx is done, the wait
// bound (WithWait) runs out, or the backend fails. A wait that runs out
// returns an error matching both ErrTimeout and context.DeadlineExceeded,
// whether WithWait or a ctx deadline bounded it; ErrTimeout means only that
// someone else held the lock for the whole wait. A backend that cannot be
// reached fails the call with ErrUnavailable instead, within
// DefaultRequestTimeout of its last answer. An owner set with WithOwner
// makes the call reentrant.
func (l *Locker) Lock(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	if ctx == nil {
		panic("padlock: Lock called with a nil Context")
	}
	return l.acquireTraced(ctx, "Lock", name, true, backends.Exclusive, opts)
}

// TryLock makes one attempt and never waits for the holder: if another owner
// holds the lock it returns an error matching ErrNotAcquired. It never
// waits on an outage either: a backend that does not answer within
// DefaultRequestTimeout fails it with ErrUnavailable.
func (l *Locker) TryLock(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	if ctx == nil {
		panic("padlock: TryLock called with a nil Context")
	}
	return l.acquireTraced(ctx, "TryLock", name, false, backends.Exclusive, opts)
}

// acquireTraced is Lock, TryLock, RLock and TryRLock (op): it records the
// call's span and metrics around acquireOrJoin, and returns its error as
// the API does (tidy).
func (l *Locker) acquireTraced(ctx context.Context, op, name string, wait bool, mode backends.Mode, opts []Option) (*Lock, error) {
	start := time.Now()
	ctx, span := l.tel.startAcquire(ctx, op, name)
	lk, err := l.acquireOrJoin(ctx, name, wait, mode, opts)
	err = tidy(err)
	l.tel.endAcquire(ctx, span, op, start, lk, err)
	return lk, err
}

// acquireOrJoin checks the name and options, bounds the wait
// (boundAcquire), and then either joins the live hold of the context's
// owner on the name (reentrancy: a new handle, no request), waits for
// that owner's acquisition in flight to settle and tries again, or asks
// the driver for a new hold (acquireFromDriver). Every error it returns is
// in the portable classes (acquireError).
func (l *Locker) acquireOrJoin(ctx context.Context, name string, wait bool, mode backends.Mode, opts []Option) (*Lock, error) {
	if err := validateName(name); err != nil {
		return nil, err
	}
	s, err := l.defaults.apply(opts)
	if err != nil {
		return nil, err
	}
	if err := l.checkClaim(name, mode, s); err != nil {
		return nil, err
	}
	if err := l.enter(); err != nil {
		return nil, err
	}
	defer l.calls.Done()
	actx, cancel := l.boundAcquire(ctx, wait, s.wait)
	defer cancel()
	return l.acquireBounded(ctx, actx, name, wait, mode, s)
}

// checkClaim refuses a mode and limit that make no sense together, or
// that the backend cannot grant by Mode's rule.
func (l *Locker) checkClaim(name string, mode backends.Mode, s settings) error {
	limit := s.limit
	switch {
	case s.elect && limit > 1:
		return fmt.Errorf("%w: election %q: a campaign takes no limit (asked %d): an election has one leader", ErrInvalidOption, name, limit)
	case s.elect && !l.caps.Elections:
		return fmt.Errorf("election %q: %w (see docs/election.md)", name, ErrUnsupported)
	case mode == backends.Shared && limit > 1:
		return fmt.Errorf("%w: lock %q: RLock takes no limit (asked %d): a read-write lock is not a semaphore", ErrInvalidOption, name, limit)
	case mode == backends.Shared && !l.caps.SharedLocks:
		return fmt.Errorf("lock %q: read-write locks: %w (see docs/readwrite.md)", name, ErrUnsupported)
	case limit > 1 && !l.caps.Limits:
		return fmt.Errorf("lock %q: semaphores (WithLimit): %w (see docs/semaphore.md)", name, ErrUnsupported)
	}
	return nil
}

// acquireBounded is acquireOrJoin once the call is checked and counted:
// actx is ctx bounded by boundAcquire.
func (l *Locker) acquireBounded(ctx, actx context.Context, name string, wait bool, mode backends.Mode, s settings) (*Lock, error) {
	start := time.Now()
	// Nothing but the Locker's closing ends this call: no deadline of the
	// caller's, and no wait bound on actx (WithWait here, or the bound of
	// a LockAll whose names acquire one by one with no bound of their own).
	_, bounded := actx.Deadline()
	noCancel := wait && !bounded && ctx.Done() == nil
	// A call that is over before it starts touches nothing, on every backend.
	if actx.Err() != nil {
		return nil, l.acquireError(actx, name, start, actx.Err())
	}

	owner := ownerFrom(ctx)
	if s.elect {
		owner = "" // a candidacy is never reentrant: two campaigns are two candidates
	}
	for owner != "" {
		lk, pending, sharing, err := l.joinOwned(ownedKey{owner, name}, mode, s.limit)
		switch {
		case err != nil:
			return nil, err
		case lk != nil:
			return lk, nil
		case pending == nil:
			// A reservation: this call acquires for the owner.
			lk, err := l.acquireFromDriver(actx, name, owner, wait, noCancel, mode, s)
			if err != nil {
				return nil, l.acquireError(actx, name, start, err)
			}
			return lk, nil
		case !wait && !sharing:
			// TryLock never waits, not even for the same owner's acquisition.
			return nil, fmt.Errorf("lock %q: %w: the same owner is still acquiring it", name, ErrNotAcquired)
		}
		// The same owner is acquiring this name right now, or turning its
		// writer into a reader (a downgrade, which even a TryLock waits
		// for: it is one request); share its result.
		select {
		case <-pending:
		case <-actx.Done():
			return nil, l.acquireError(actx, name, start, context.Cause(actx))
		}
	}
	lk, err := l.acquireFromDriver(actx, name, "", wait, noCancel, mode, s)
	if err != nil {
		return nil, l.acquireError(actx, name, start, err)
	}
	return lk, nil
}

// boundAcquire returns ctx bounded for one acquisition: cancelled with
// ErrClosed when the Locker closes, and bounded by one request's time for
// TryLock (which never waits) or by the wait bound (WithWait) for Lock.
func (l *Locker) boundAcquire(ctx context.Context, wait bool, bound time.Duration) (context.Context, context.CancelFunc) {
	actx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(l.ctx, func() { cancel(ErrClosed) })
	var cancelBound context.CancelFunc = func() {}
	switch {
	case !wait:
		actx, cancelBound = driverkit.WithRequestTimeout(actx, 0)
	case bound > 0:
		actx, cancelBound = context.WithTimeout(actx, bound)
	}
	return actx, func() {
		cancelBound()
		stop()
		cancel(nil)
	}
}

// enter registers a call in flight, failing on a closed Locker.
func (l *Locker) enter() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.calls.Add(1)
	return nil
}

// joinOwned returns a new handle on the owner's live hold of the name
// (hold.join says which claims it can serve); or a channel to wait on
// while another call of the same owner acquires the name, or while the
// owner's hold turns from writer into reader (sharing); or, with both nil,
// a reservation in l.pending that the caller must settle through
// acquireFromDriver.
func (l *Locker) joinOwned(k ownedKey, mode backends.Mode, limit int) (_ *Lock, _ <-chan struct{}, sharing bool, _ error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, nil, false, ErrClosed
	}
	if h := l.owned[k]; h != nil {
		lk, wait, err := h.join(mode, limit)
		if lk != nil || wait != nil || err != nil {
			return lk, wait, wait != nil, err
		}
	}
	if ch := l.pending[k]; ch != nil {
		return nil, ch, false, nil
	}
	l.pending[k] = make(chan struct{})
	return nil, nil, false, nil
}

// acquireFromDriver asks the driver for a new hold (again, if the grant
// came after its deadline), makes its first handle, and
// only then publishes the hold and schedules its renewals, so that neither
// a joining handle's Unlock nor the renewal loop can end it first. For an
// owned hold it settles the reservation joinOwned made.
func (l *Locker) acquireFromDriver(ctx context.Context, name, owner string, wait, noCancel bool, mode backends.Mode, s settings) (*Lock, error) {
	var reservation chan struct{}
	if owner != "" {
		l.mu.Lock()
		reservation = l.pending[ownedKey{owner, name}]
		l.mu.Unlock()
		// Settle the reservation even if the driver panics, so that the
		// owner's other calls do not wait on it for ever.
		defer l.settle(ownedKey{owner, name}, reservation, nil)
	}
	req := backends.Request{Name: name, TTL: s.ttl, Wait: wait, Retry: s.retry, NoCancel: noCancel, Owner: owner,
		Mode: mode, Limit: s.limit, Elect: s.elect, Value: s.value}
	// A waiting Lock whose first grant it keeps may end a hand-off from
	// a hold of this Locker (handoffs); the deferred call settles the
	// wait whatever happens, a driver's panic included.
	var (
		first backends.Hold // the driver's first grant
		got   time.Time     // when it came
		kept  backends.Hold // first, once the Locker holds it
	)
	if wait && timesHandoff(mode, s.limit) {
		since := l.hand.wait(name)
		defer func() {
			if d, ok := l.hand.granted(name, since, got, kept); ok {
				l.tel.recordHandoff(d)
			}
		}()
	}
	dh, err := l.drv.Acquire(ctx, req)
	first, got = dh, time.Now()
	for err == nil && dh != nil && !time.Now().Before(dh.Grant().Deadline()) {
		// The grant's lease ran out before its answer could be acted on:
		// the process was paused, or the answer was slow, after the
		// server granted it (seen with a fair Redis queue handing the
		// lock to a stopped waiter). Another client may hold the lock
		// by now; this is no grant. Give it back, and wait again.
		stale := dh
		l.giveBack(stale)
		dh = nil
		l.log.Warn("padlock: a grant came after its lease had run out; given back",
			"lock", name, "token", stale.Token(), "lease", stale.Grant().TTL, "late", time.Since(stale.Grant().Deadline()))
		switch {
		case wait && ctx.Err() != nil:
			err = context.Cause(ctx) // the wait's own end: ErrTimeout, Canceled or ErrClosed
		case !wait:
			err = fmt.Errorf("%w: the grant came after its %v lease had run out (a paused process or a slow answer)",
				ErrUnavailable, stale.Grant().TTL)
		default:
			dh, err = l.drv.Acquire(ctx, req)
			continue
		}
		break
	}
	if err == nil && dh == nil {
		err = fmt.Errorf("%w: driver returned no hold and no error", ErrUnavailable)
	}
	var (
		h  *hold
		lk *Lock
	)
	l.mu.Lock()
	if err == nil && l.closed {
		err = ErrClosed
	}
	if err == nil {
		h, lk = l.publishLocked(ctx, name, owner, dh, mode, s.limit)
	}
	if owner != "" {
		l.settleLocked(ownedKey{owner, name}, reservation, h)
	}
	l.mu.Unlock()
	if err != nil {
		if dh != nil {
			l.giveBack(dh) // closed while acquiring
		}
		return nil, err
	}
	l.start(ctx, h)
	if dh == first {
		kept = dh
	}
	return lk, nil
}

// publishLocked makes a new hold of the driver's dh, with its first
// handle, and publishes it in l.holds; l.mu must be held. The caller then
// starts it (start).
func (l *Locker) publishLocked(ctx context.Context, name, owner string, dh backends.Hold, mode backends.Mode, limit int) (*hold, *Lock) {
	h := newHold(l, name, owner, dh, mode, limit)
	h.since, h.acquiredBy = time.Now(), trace.SpanContextFromContext(ctx)
	lk := h.newHandle(mode == backends.Shared)
	l.holds[h] = struct{}{}
	return h, lk
}

// start counts a published hold and puts it on the renewal loop and its
// driver's loss watch.
func (l *Locker) start(ctx context.Context, h *hold) {
	l.tel.holdStarted(ctx)
	l.renew.add(h)
	h.watchLoss()
}

// giveBack releases a driver's hold that never became a hold of the
// Locker (a stale grant, or a grant that came as the Locker closed): in
// the background, so that Close's context bounds it (Close waits for the
// janitor), or at once if the janitor has closed already.
func (l *Locker) giveBack(dh backends.Hold) {
	if !l.janitor.Go(dh.Release) {
		rctx, cancel := driverkit.WithRequestTimeout(context.Background(), 0)
		_ = dh.Release(rctx)
		cancel()
	}
}

// settle ends the reservation ch of a name for an owner: h becomes the
// owner's hold (nil: the acquisition failed), and the owner's waiting calls
// go on. A reservation settled already (or a newer one) is left alone.
func (l *Locker) settle(k ownedKey, ch chan struct{}, h *hold) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.settleLocked(k, ch, h)
}

func (l *Locker) settleLocked(k ownedKey, ch chan struct{}, h *hold) {
	if ch == nil || l.pending[k] != ch {
		return
	}
	if h != nil {
		l.owned[k] = h
	}
	close(ch)
	delete(l.pending, k)
}

// acquireError turns a failed acquisition into the portable error classes.
// ErrTimeout is kept for a wait that ran out; a backend that did not answer
// is ErrUnavailable, whatever the context says.
func (l *Locker) acquireError(ctx context.Context, name string, start time.Time, err error) error {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, ErrClosed) || errors.Is(err, ErrClosed):
		return fmt.Errorf("lock %q: %w", name, ErrClosed)
	case errors.Is(err, ErrUnavailable):
		return fmt.Errorf("lock %q: %w", name, err)
	case errors.Is(cause, driverkit.ErrNoAnswer):
		return fmt.Errorf("lock %q: %w", name, driverkit.Unavailable("no answer", fmt.Errorf("%w within %v", cause, DefaultRequestTimeout)))
	case errors.Is(cause, context.DeadlineExceeded):
		return fmt.Errorf("%w: lock %q not acquired after %v: %w",
			ErrTimeout, name, time.Since(start).Round(time.Millisecond), context.DeadlineExceeded)
	case errors.Is(cause, context.Canceled):
		return fmt.Errorf("lock %q: %w", name, context.Canceled)
	}
	return fmt.Errorf("lock %q: %w", name, err)
}
