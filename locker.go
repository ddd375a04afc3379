// Package padlock is a distributed lock framework with one API over several
// backends, picked by URL: etcd (the reference CP backend), Redis (single
// instance, fair queue, Cluster and RedLock), and an in-process backend for
// tests; ZooKeeper, PostgreSQL and MySQL implement the same driver contract
// next.
//
//	locker, err := padlock.Open(ctx, "etcd://127.0.0.1:2379/padlock?ttl=10s")
//	lk, err := locker.Lock(ctx, "orders/42")
//	defer lk.Unlock(ctx)
//	// ... work, passing lk.Token() to the storage you write to ...
//
// Holding a distributed lock is never a certainty: a pause, a partition or a
// server failover can end a hold at any moment. Watch lk.Done(), which closes
// before the server could grant the lock to anyone else, and pass the fencing
// token lk.Token() to the resource you protect so that it can reject writes
// from a holder that lost the lock without knowing. See docs/ for each
// backend's measured guarantees.
package padlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/padlock-go/padlock/backends"
)

// Locker acquires locks from one backend. It is safe for concurrent use. A
// Locker is one client: reentrancy is scoped to it, and its Close releases
// everything it holds.
type Locker struct {
	drv      backends.Driver
	caps     Capabilities
	defaults settings

	ctx    context.Context // cancelled by Close, aborting waits and retries
	cancel context.CancelFunc

	mu       sync.Mutex
	closed   bool
	bgClosed bool               // no new background work once Close waits for it
	owned    map[ownedKey]*hold // reentrant holds by owner and name
	holds    map[*hold]struct{} // every live hold, for Close
	calls    sync.WaitGroup     // Lock and TryLock calls in flight
	bg       sync.WaitGroup     // watchdogs and background releases
}

type ownedKey struct{ owner, name string }

func newLocker(drv backends.Driver, s settings) *Locker {
	ctx, cancel := context.WithCancel(context.Background())
	return &Locker{
		drv: drv, caps: drv.Capabilities(), defaults: s,
		ctx: ctx, cancel: cancel,
		owned: map[ownedKey]*hold{}, holds: map[*hold]struct{}{},
	}
}

// Capabilities reports the guarantees of this Locker's backend configuration.
func (l *Locker) Capabilities() Capabilities { return l.caps }

// Lock blocks until it holds the lock called name, ctx is done, the wait
// bound (WithWait) runs out, or the backend fails. A wait that runs out
// returns an error matching both ErrTimeout and context.DeadlineExceeded,
// whether WithWait or a ctx deadline bounded it. An owner set with WithOwner
// makes the call reentrant.
func (l *Locker) Lock(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	return l.acquire(ctx, name, true, opts)
}

// TryLock makes one attempt and never waits for the holder: if another owner
// holds the lock it returns an error matching ErrNotAcquired.
func (l *Locker) TryLock(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	return l.acquire(ctx, name, false, opts)
}

func (l *Locker) acquire(ctx context.Context, name string, wait bool, opts []Option) (*Lock, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	s, err := l.defaults.apply(opts)
	if err != nil {
		return nil, err
	}
	if err := l.enter(); err != nil {
		return nil, err
	}
	defer l.calls.Done()

	// Bound the wait and abort it when the Locker closes.
	start := time.Now()
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(l.ctx, func() { cancel(ErrClosed) })
	defer stop()
	if wait && s.wait > 0 {
		var c context.CancelFunc
		actx, c = context.WithTimeout(actx, s.wait)
		defer c()
	}

	owner := OwnerFrom(ctx)
	if owner == "" {
		lk, err := l.acquireNew(actx, name, "", wait, s)
		if err != nil {
			return nil, l.classify(actx, name, start, err)
		}
		return lk, nil
	}
	for {
		lk, pending, err := l.joinOwned(ownedKey{owner, name})
		switch {
		case err != nil:
			return nil, err
		case lk != nil:
			return lk, nil
		case pending != nil && !wait:
			// TryLock never waits, not even for the same owner's acquisition.
			return nil, fmt.Errorf("lock %q: %w: the same owner is still acquiring it", name, ErrNotAcquired)
		case pending != nil:
			// The same owner is acquiring this name right now; share its result.
			select {
			case <-pending:
				continue
			case <-actx.Done():
				return nil, l.classify(actx, name, start, context.Cause(actx))
			}
		}
		lk, err = l.acquireNew(actx, name, owner, wait, s)
		if err != nil {
			return nil, l.classify(actx, name, start, err)
		}
		return lk, nil
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

// joinOwned returns a new handle on the owner's live hold of the name; or a
// channel to wait on while another call of the same owner acquires it; or,
// with both nil, a reservation that the caller must fill through acquireNew.
func (l *Locker) joinOwned(k ownedKey) (*Lock, <-chan struct{}, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, nil, ErrClosed
	}
	if h := l.owned[k]; h != nil {
		if h.ready != nil {
			return nil, h.ready, nil
		}
		if lk := h.newHandle(); lk != nil {
			return lk, nil, nil
		}
	}
	l.owned[k] = &hold{ready: make(chan struct{})}
	return nil, nil, nil
}

// acquireNew asks the driver for a new hold, makes its first handle, and
// only then publishes the hold and starts its watchdog, so that neither a
// joining handle's Unlock nor the watchdog can finish it first. For an owned
// hold it fills (or, on failure, drops) the reservation joinOwned made.
func (l *Locker) acquireNew(ctx context.Context, name, owner string, wait bool, s settings) (*Lock, error) {
	dh, err := l.drv.Acquire(ctx, backends.Request{Name: name, TTL: s.ttl, Wait: wait, Retry: s.retry})
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
		h = newHold(l, name, owner, dh)
		lk = h.newHandle()
		l.holds[h] = struct{}{}
	}
	if owner != "" {
		k := ownedKey{owner, name}
		reservation := l.owned[k]
		if h != nil {
			l.owned[k] = h
		} else {
			delete(l.owned, k)
		}
		close(reservation.ready)
	}
	if h != nil {
		l.bg.Add(1)
	}
	l.mu.Unlock()
	if err != nil {
		if dh != nil {
			// Closed while acquiring: give the hold back before Close
			// closes the driver.
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = dh.Release(rctx)
			cancel()
		}
		return nil, err
	}
	go h.watch()
	return lk, nil
}

// classify turns a failed acquisition into the portable error classes.
func (l *Locker) classify(ctx context.Context, name string, start time.Time, err error) error {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, ErrClosed) || errors.Is(err, ErrClosed):
		return fmt.Errorf("lock %q: %w", name, ErrClosed)
	case errors.Is(cause, context.DeadlineExceeded):
		return fmt.Errorf("%w: lock %q not acquired after %v: %w",
			ErrTimeout, name, time.Since(start).Round(time.Millisecond), context.DeadlineExceeded)
	case errors.Is(cause, context.Canceled):
		return fmt.Errorf("lock %q: %w", name, context.Canceled)
	}
	return fmt.Errorf("lock %q: %w", name, err)
}

// forget drops a finished hold from the Locker's indexes.
func (l *Locker) forget(h *hold) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.holds, h)
	if h.owner != "" {
		if k := (ownedKey{h.owner, h.name}); l.owned[k] == h {
			delete(l.owned, k)
		}
	}
}

// DefaultCloseTimeout bounds Close: releases that cannot reach the server
// by then are abandoned to their server-side lease.
const DefaultCloseTimeout = 10 * time.Second

// Close releases every hold of this Locker (their Err becomes ErrClosed),
// aborts waiting calls with ErrClosed, and closes the backend client, all
// within DefaultCloseTimeout. Calls on a closed Locker return ErrClosed; a
// second Close returns nil.
func (l *Locker) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultCloseTimeout)
	defer cancel()
	return l.CloseContext(ctx)
}

// CloseContext is Close with a context bounding the releases.
func (l *Locker) CloseContext(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	holds := make([]*hold, 0, len(l.holds))
	for h := range l.holds {
		holds = append(holds, h)
	}
	l.mu.Unlock()

	l.cancel() // aborts waiting calls and background retries
	l.calls.Wait()
	var (
		errs  []error
		errMu sync.Mutex
		wg    sync.WaitGroup
		sem   = make(chan struct{}, 16) // release in parallel, politely
	)
	for _, h := range holds {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := h.finish(ctx, ErrClosed); err != nil && !errors.Is(err, ErrNotHeld) {
				errMu.Lock()
				errs = append(errs, err)
				errMu.Unlock()
			}
		})
	}
	wg.Wait()
	l.mu.Lock()
	l.bgClosed = true
	l.mu.Unlock()
	bgDone := make(chan struct{})
	go func() {
		l.bg.Wait()
		close(bgDone)
	}()
	select {
	case <-bgDone:
	case <-ctx.Done():
		// A driver call that ignores its context is still running; closing
		// the driver below is what can still end it.
		errs = append(errs, fmt.Errorf("padlock: close: background work still running: %w", ctx.Err()))
	}
	if err := l.drv.Close(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// inBackground runs f on a goroutine that Close waits for, unless Close has
// stopped accepting background work; it reports whether f was started.
func (l *Locker) inBackground(f func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bgClosed {
		return false
	}
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		f()
	}()
	return true
}

// releaseInBackground keeps trying to release a hold whose release failed
// for a transient reason, so that no key outlives its use on backends where
// a shared session lease would otherwise keep it alive. It stops on success,
// when the server says the hold is gone, or when the Locker closes (the
// driver's Close then removes the client's server-side state).
func (l *Locker) releaseInBackground(dh backends.Hold, name string) {
	l.inBackground(func() {
		backoff := ExponentialBackoff(50*time.Millisecond, 5*time.Second)
		for attempt := 0; ; attempt++ {
			ctx, cancel := context.WithTimeout(l.ctx, 10*time.Second)
			err := dh.Release(ctx)
			cancel()
			if err == nil || errors.Is(err, ErrNotHeld) {
				return
			}
			t := time.NewTimer(backoff.NextBackoff(attempt))
			select {
			case <-l.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	})
}
