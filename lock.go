package padlock

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/codes"

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
	read bool // a read handle (RLock), else a write handle or a permit
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
// ErrNotHeld.
//
// Unlock honours ctx, and bounds its own wait by DefaultRequestTimeout. If
// the server cannot be reached, or ctx ends first, Unlock returns an error
// matching ErrUnavailable (and the context's error, if that ended it), and
// padlock keeps trying to release in the background until it succeeds, the
// lease runs out, or the Locker closes. Done has closed either way.
func (lk *Lock) Unlock(ctx context.Context) error {
	if ctx == nil {
		panic("padlock: Unlock called with a nil Context")
	}
	h := lk.h
	h.mu.Lock()
	if lk.ended {
		err := lk.err
		h.mu.Unlock()
		if err != nil {
			return tidy(fmt.Errorf("unlock %q: %w: %w", h.name, ErrNotHeld, err))
		}
		return tidy(fmt.Errorf("unlock %q: %w: already unlocked", h.name, ErrNotHeld))
	}
	lk.close(nil)
	delete(h.handles, lk)
	if !lk.read {
		h.writers--
	}
	if len(h.handles) > 0 {
		// Other handles still share the hold. If they are all readers of
		// a writer, the hold becomes a reader (a downgrade).
		downgrade := h.writers == 0 && h.mode == backends.Exclusive && h.limit == 1 && h.sharing == nil
		if downgrade {
			h.sharing = make(chan struct{})
		}
		h.mu.Unlock()
		if downgrade {
			return tidy(h.share(ctx))
		}
		return nil
	}
	h.endLocked() // the last handle: end the hold here, under the same lock
	h.mu.Unlock()
	h.recordEnd(nil)
	h.l.forget(h)
	if !h.acquiredBy.IsSampled() {
		// The acquisition was not traced (no provider, or not sampled):
		// neither is its release, which then costs no span at all.
		return h.release(ctx)
	}
	ctx, span := h.l.tel.tracer.Start(ctx, "padlock.Unlock", clientKind...)
	defer span.End()
	err := h.release(ctx)
	if span.IsRecording() {
		span.SetAttributes(h.l.tel.backend, attrName.String(h.name), attrToken.Int64(int64(h.token)))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "release failed")
		}
	}
	return err
}

// close ends the handle with reason; h.mu must be held.
func (lk *Lock) close(reason error) {
	lk.ended = true
	lk.err = reason
	close(lk.done)
}
