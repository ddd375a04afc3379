package padlock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/padlock-go/padlock/backends"
)

// Lock is one handle on a held lock, returned by Locker.Lock and TryLock.
// Reentrant calls of one owner return separate handles on one shared hold;
// the hold is released when its last handle is unlocked.
//
// Holding a distributed lock is never a certainty. Done closes as soon as the
// hold can no longer be guaranteed, and before the server could grant the
// lock to anyone else (see docs/lost-lock.md for the rule and its
// assumptions). Check Done, and give Token to the resource you protect.
type Lock struct {
	h    *hold
	done chan struct{}
	// guarded by h.mu
	ended bool
	err   error
}

// Name returns the lock's name.
func (lk *Lock) Name() string { return lk.h.name }

// Token returns the fencing token of the hold: an integer that increases
// strictly across successive holders of the name, where the backend's
// Capabilities say so. Reentrant handles share their hold's token.
func (lk *Lock) Token() uint64 { return lk.h.token }

// Done returns a channel that closes when this handle is unlocked or when
// the hold is lost. After it closes, Err says which.
func (lk *Lock) Done() <-chan struct{} { return lk.done }

// Err returns nil while the lock is held and after Unlock. After the hold
// was lost it returns an error matching ErrLost, and after the Locker closed
// one matching ErrClosed.
func (lk *Lock) Err() error {
	lk.h.mu.Lock()
	defer lk.h.mu.Unlock()
	return lk.err
}

// Unlock releases this handle. When it is the last handle of its hold, the
// lock is released on the server, touching nothing but this hold. Unlocking a
// handle twice, or after the hold was lost, returns an error matching
// ErrNotHeld. If the server cannot be reached, Unlock returns an error
// matching ErrUnavailable and padlock keeps trying to release in the
// background until it succeeds, the lease runs out, or the Locker closes.
func (lk *Lock) Unlock(ctx context.Context) error {
	h := lk.h
	h.mu.Lock()
	if lk.ended {
		err := lk.err
		h.mu.Unlock()
		if err != nil {
			return fmt.Errorf("unlock %q: %w: %w", h.name, ErrNotHeld, err)
		}
		return fmt.Errorf("unlock %q: %w: already unlocked", h.name, ErrNotHeld)
	}
	lk.end(nil)
	delete(h.handles, lk)
	last := len(h.handles) == 0 && !h.finished
	if last {
		h.finishLocked(nil)
	}
	h.mu.Unlock()
	if !last {
		return nil
	}
	return h.release(ctx)
}

// end closes the handle with reason; h.mu must be held.
func (lk *Lock) end(reason error) {
	lk.ended = true
	lk.err = reason
	close(lk.done)
}

// hold is one acquisition on the server, shared by an owner's handles.
type hold struct {
	l           *Locker
	name, owner string
	ready       chan struct{} // non-nil only for joinOwned's reservation

	drv         backends.Hold
	token       uint64
	stopped     context.Context // done when the hold finishes
	stop        context.CancelFunc
	watchExited chan struct{} // closed when the watchdog returns

	mu       sync.Mutex
	handles  map[*Lock]struct{}
	finished bool
}

func newHold(l *Locker, name, owner string, dh backends.Hold) *hold {
	h := &hold{
		l: l, name: name, owner: owner,
		drv: dh, token: dh.Token(),
		watchExited: make(chan struct{}),
		handles:     map[*Lock]struct{}{},
	}
	h.stopped, h.stop = context.WithCancel(context.Background())
	return h
}

// newHandle returns a new handle, or nil if the hold has finished.
func (h *hold) newHandle() *Lock {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.finished {
		return nil
	}
	lk := &Lock{h: h, done: make(chan struct{})}
	h.handles[lk] = struct{}{}
	return lk
}

// finishLocked ends the hold and every handle with reason; h.mu must be held.
func (h *hold) finishLocked(reason error) {
	h.finished = true
	for lk := range h.handles {
		lk.end(reason)
	}
	clear(h.handles)
	h.stop()
}

// finish ends the hold with reason and releases it with ctx. It returns nil
// without doing anything if the hold had already finished.
func (h *hold) finish(ctx context.Context, reason error) error {
	h.mu.Lock()
	if h.finished {
		h.mu.Unlock()
		return nil
	}
	h.finishLocked(reason)
	h.mu.Unlock()
	return h.release(ctx)
}

// release frees the hold on the server once the watchdog has stopped, so a
// renewal never races the release.
func (h *hold) release(ctx context.Context) error {
	<-h.watchExited
	h.l.forget(h)
	err := h.drv.Release(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotHeld):
		return fmt.Errorf("unlock %q: %w", h.name, err)
	}
	h.l.releaseInBackground(h.drv, h.name)
	return fmt.Errorf("unlock %q: %w (retrying in the background)", h.name, err)
}

// lose ends the hold because it can no longer be guaranteed. It runs on the
// watchdog goroutine, so it releases in the background.
func (h *hold) lose(cause error) {
	if h.end(cause) {
		h.l.releaseInBackground(h.drv, h.name)
	}
}

// end finishes a lost hold without releasing it: every handle's Done closes
// with cause. It reports whether this call ended it.
func (h *hold) end(cause error) bool {
	h.mu.Lock()
	if h.finished {
		h.mu.Unlock()
		return false
	}
	h.finishLocked(fmt.Errorf("lock %q: %w", h.name, cause))
	h.mu.Unlock()
	h.l.forget(h)
	return true
}
