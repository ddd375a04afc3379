package padlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// hold is one acquisition on the server, shared by the handles of one owner.
// It has two states; end (or Unlock of the last handle, under the same
// lock) leaves the first:
//
//	held ── last handle unlocked ──▶ ended(nil)       ─▶ release(ctx) by Unlock
//	     ── last write handle unlocked, read handles left ─▶ held as a reader (share)
//	     ── Locker closing ────────▶ ended(ErrClosed) ─▶ release(ctx) by Close
//	     ── lease deadline passed,
//	        or the server says gone ▶ ended(ErrLost)  ─▶ released in the background
//
// end closes every handle's Done with the reason, takes the hold off the
// renewal loop and out of the Locker's indexes, and reports whether this
// call ended it; only that caller releases. A release never overlaps a
// renewal: it first waits for the renewal in flight, if any. A release that
// cannot finish in its caller's time goes to the Locker's janitor.
type hold struct {
	l           *Locker
	name, owner string
	dh          backends.Hold // the driver's side of this hold
	token       uint64
	limit       int         // Request.Limit: 1, or n for a permit of a semaphore of n
	sched       schedule    // the renewal loop's state, guarded by l.renew.mu
	lease       *leaseGroup // the driver's lease that keeps it (backends.LeaseSharer), or nil; set once
	member      int         // its position among lease's holds, -1 once it left; guarded by l.renew.mu

	mu       sync.Mutex
	ended    bool
	mode     backends.Mode      // Shared once a writer turned reader (share)
	handles  map[*Lock]struct{} // read and write handles
	writers  int                // write handles among them
	sharing  chan struct{}      // non-nil while share runs; closed when it is over
	stopLoss func() bool        // stops watching the driver's loss notice, if any

	since      time.Time         // when it was acquired, for the hold-time metric
	acquiredBy trace.SpanContext // the acquiring call's span, linked from a loss's
}

func newHold(l *Locker, name, owner string, dh backends.Hold, mode backends.Mode, limit int) *hold {
	return &hold{
		l: l, name: name, owner: owner, dh: dh, token: dh.Token(), mode: mode, limit: limit,
		handles: map[*Lock]struct{}{}, sched: schedule{index: -1}, member: -1,
	}
}

// watchLoss ends the hold with ErrLost as soon as its driver reports it
// lost between renewals (backends.LossNotifier), and releases it.
func (h *hold) watchLoss() {
	ln, ok := h.dh.(backends.LossNotifier)
	if !ok {
		return
	}
	lost := ln.Lost()
	stop := context.AfterFunc(lost, func() {
		if h.end(fmt.Errorf("%w: %w", ErrLost, context.Cause(lost))) {
			h.releaseInBackground()
		}
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		stop()
		return
	}
	h.stopLoss = stop
}

// newHandle returns a new read or write handle, or nil if the hold has
// ended.
func (h *hold) newHandle(read bool) *Lock {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return nil
	}
	return h.newHandleLocked(read)
}

func (h *hold) newHandleLocked(read bool) *Lock {
	lk := &Lock{h: h, read: read, done: make(chan struct{})}
	h.handles[lk] = struct{}{}
	if !read {
		h.writers++
	}
	return lk
}

// join serves a reentrant claim of the hold's owner with a new handle on
// the hold: a writer (limit 1) serves both Lock and RLock; a reader serves
// RLock and refuses Lock (ErrUpgrade: the writer would wait for its own
// reader); a permit serves Lock with the same limit. A claim with another
// limit is ErrInvalidOption. While share runs it returns the channel to
// wait on; it returns nothing at all for a hold that has ended.
func (h *hold) join(mode backends.Mode, limit int) (*Lock, <-chan struct{}, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.ended:
		return nil, nil, nil
	case h.sharing != nil:
		return nil, h.sharing, nil
	case limit != h.limit:
		return nil, nil, fmt.Errorf("%w: lock %q is held by this owner with limit %d; asked with limit %d",
			ErrInvalidOption, h.name, h.limit, limit)
	case mode == backends.Exclusive && h.mode == backends.Shared:
		return nil, nil, fmt.Errorf("lock %q: %w (owner %q)", h.name, ErrUpgrade, h.owner)
	}
	return h.newHandleLocked(mode == backends.Shared), nil, nil
}

// share turns the hold from writer into reader on the server (a
// downgrade: its last write handle was unlocked and read handles remain),
// run by the renewal loop as the hold's renewal so that neither overlaps
// the other. h.sharing was set under h.mu by the caller; share clears it.
//
// If the server's answer is lost the hold may be either on the server;
// it is then kept as a reader here (the owner gets ErrUpgrade for Lock)
// and as a writer to others, which is safe both ways.
func (h *hold) share(ctx context.Context) error {
	defer func() {
		h.mu.Lock()
		h.mode = backends.Shared
		close(h.sharing)
		h.sharing = nil
		h.mu.Unlock()
	}()
	sh, ok := h.dh.(backends.Sharer)
	if !ok {
		// A driver that reports SharedLocks without Sharer breaks the
		// contract: the hold stays a writer to everyone.
		return fmt.Errorf("unlock %q: %w: the backend cannot turn a writer into a reader", h.name, ErrUnsupported)
	}
	rctx, cancel := driverkit.WithRequestTimeout(ctx, 0)
	defer cancel()
	err := h.l.renew.runAsRenewal(rctx, h, sh.Share)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotHeld):
		return fmt.Errorf("unlock %q: the read side it keeps is lost: %w: %w", h.name, ErrLost, err)
	}
	return fmt.Errorf("unlock %q: turning the writer into a reader: %w", h.name, driverkit.Unavailable("share", err))
}

// end leaves the held state with reason (nil for Unlock), closing every
// remaining handle's Done with it. It reports whether this call ended the
// hold; the caller must then release it.
func (h *hold) end(reason error) bool {
	reason, ended := h.closeHandles(reason)
	if ended {
		h.afterEnd(reason)
	}
	return ended
}

// closeHandles is end's first step: it marks the hold ended and closes
// every remaining handle's Done with reason, tidied as Err returns it,
// and reports whether this call ended the hold. The caller must then call
// afterEnd with that reason, and release the hold.
func (h *hold) closeHandles(reason error) (error, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return nil, false
	}
	reason = tidy(reason) // what Err returns
	for lk := range h.handles {
		lk.close(reason)
	}
	clear(h.handles)
	h.endLocked()
	return reason, true
}

// afterEnd is end's second step, after closeHandles ended the hold: it
// records the end (a provider's code, never run under h.mu) and takes the
// hold out of the Locker's tables.
func (h *hold) afterEnd(reason error) {
	h.recordEnd(reason)
	h.l.forget(h)
}

// endLocked marks the hold ended, under h.mu: it stops watching the
// driver's loss notice (whose watch otherwise stays registered on a
// context that may outlive the hold by far, an advisory session's) and
// takes the hold off the renewal loop, under the same lock, so that no
// renewal can start for it from here on (lock order: h.mu, then the
// renewer's).
func (h *hold) endLocked() {
	h.ended = true
	if h.stopLoss != nil {
		h.stopLoss()
	}
	h.l.renew.remove(h)
}

// release frees an ended hold on the server, after the renewal in flight
// (if any) has returned; the wait and the release together are bounded by
// ctx and DefaultRequestTimeout. What it cannot finish goes to the
// background.
func (h *hold) release(ctx context.Context) error {
	return tidy(h.releaseOnce(ctx))
}

// releaseOnce is release before tidy.
func (h *hold) releaseOnce(ctx context.Context) error {
	rctx, cancel := driverkit.WithRequestTimeout(ctx, 0)
	defer cancel()
	if renewing := h.l.renew.inFlight(h); renewing != nil {
		select {
		case <-renewing:
		case <-rctx.Done():
			h.releaseInBackground()
			return fmt.Errorf("unlock %q: %w", h.name, driverkit.Unavailable("release",
				fmt.Errorf("a renewal is still unanswered; releasing in the background: %w", context.Cause(rctx))))
		}
	}
	h.mu.Lock()
	timed := timesHandoff(h.mode, h.limit)
	h.mu.Unlock()
	if timed {
		h.l.hand.releasing(h.name, h.token)
	}
	err := h.dh.Release(rctx)
	if timed {
		if d, ok := h.l.hand.released(h.name, h.token, err == nil); ok {
			h.l.tel.recordHandoff(d)
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotHeld):
		return fmt.Errorf("unlock %q: %w", h.name, err)
	}
	h.retryReleaseInBackground()
	return fmt.Errorf("unlock %q: %w (retrying in the background)", h.name, driverkit.Unavailable("release", err))
}

// releaseInBackground hands the release to the Locker's janitor, which
// waits for any renewal in flight and retries until the server answers,
// says the hold is gone, or the Locker closes (the driver's Close then
// removes the client's server-side state). No key outlives its use on
// backends where a shared session lease would otherwise keep it alive.
func (h *hold) releaseInBackground() { h.backgroundRelease(h.l.janitor.Go) }

// retryReleaseInBackground is releaseInBackground after a release that
// just failed: the first retry waits a back-off (a server that refused
// the release is not asked again at once).
func (h *hold) retryReleaseInBackground() { h.backgroundRelease(h.l.janitor.Retry) }

// backgroundRelease hands the release to the janitor through start.
func (h *hold) backgroundRelease(start func(func(context.Context) error) bool) {
	renewing := h.l.renew.inFlight(h)
	ok := start(func(ctx context.Context) error {
		if renewing != nil {
			select {
			case <-renewing:
				renewing = nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		err := h.dh.Release(ctx)
		if err != nil && !errors.Is(err, ErrNotHeld) {
			h.l.log.Debug("padlock: background release failed; retrying", "lock", h.name, "err", err)
		}
		return err
	})
	if !ok {
		h.l.log.Debug("padlock: locker closing; hold left to its lease", "lock", h.name)
	}
}
