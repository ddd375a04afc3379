package padlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// MaxValueLen is the longest value a candidate may campaign with or
// proclaim, in bytes: what every backend stores with a claim.
const MaxValueLen = 4096

// Leader is an election's leader: the value it proclaimed last and the
// fencing token of its term. The zero Leader, sent by Observe, means no
// leader.
type Leader = backends.Leader

// Election is the election called name: the leader is the holder of the
// lock of that name, so an election and a lock must not share a name.
// Candidates campaign with a value (their address, say), which others read
// with Leader and Observe. See docs/election.md.
type Election struct {
	l    *Locker
	name string
}

// Election returns the election called name. It checks nothing: Campaign,
// Leader and Observe report an invalid name.
func (l *Locker) Election(name string) *Election { return &Election{l: l, name: name} }

// Leadership is a candidate's term as leader, returned by Campaign. Its
// lease is renewed as a lock's is; Done closes when the term can no longer
// be guaranteed, before any other candidate can be elected (the lost-lock
// rule, docs/lost-lock.md), and Err then matches ErrLost.
type Leadership struct {
	e  *Election
	lk *Lock
}

// Campaign blocks until this candidate is elected, ctx is done or the wait
// bound (WithWait) runs out; it then leaves no candidacy behind. Where the
// backend queues (FairFIFO), candidates are elected in arrival order. A
// campaign is never reentrant: WithOwner does not apply, and two campaigns
// are two candidates. Options are a lock's (WithTTL, WithWait, WithRetry);
// WithLimit is ErrInvalidOption. A value longer than MaxValueLen is
// ErrInvalidOption.
func (e *Election) Campaign(ctx context.Context, value string, opts ...Option) (*Leadership, error) {
	if ctx == nil {
		panic("padlock: Campaign called with a nil Context")
	}
	if err := checkValue(e.name, value); err != nil {
		return nil, tidy(err)
	}
	opts = append(opts[:len(opts):len(opts)], lockOption(func(s *settings) error {
		s.elect, s.value = true, value
		return nil
	}))
	lk, err := e.l.acquireTraced(ctx, "Campaign", e.name, true, backends.Exclusive, opts)
	if err != nil {
		return nil, err
	}
	return &Leadership{e: e, lk: lk}, nil
}

// Leader returns the election's leader as the server records it now, or
// ErrNoLeader.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	if ctx == nil {
		panic("padlock: Leader called with a nil Context")
	}
	ld, err := e.leader(ctx)
	return ld, tidy(err)
}

func (e *Election) leader(ctx context.Context) (Leader, error) {
	el, err := e.elector()
	if err != nil {
		return Leader{}, err
	}
	if err := e.l.enter(); err != nil {
		return Leader{}, err
	}
	defer e.l.calls.Done()
	rctx, cancel := driverkit.WithRequestTimeout(ctx, 0)
	defer cancel()
	ld, ok, err := el.Leader(rctx, e.name)
	switch {
	case err != nil:
		return Leader{}, fmt.Errorf("election %q: %w", e.name, inspectError(ctx, "read the leader", err))
	case !ok:
		return Leader{}, fmt.Errorf("election %q: %w", e.name, ErrNoLeader)
	}
	return ld, nil
}

// elector checks the name and the backend.
func (e *Election) elector() (backends.Elector, error) {
	if err := validateName(e.name); err != nil {
		return nil, err
	}
	el, ok := e.l.drv.(backends.Elector)
	if !ok || !e.l.caps.Elections {
		return nil, fmt.Errorf("election %q: %w (see docs/election.md)", e.name, ErrUnsupported)
	}
	return el, nil
}

// Token returns the fencing token of this term: it rises with each term,
// where the backend's Capabilities say MonotonicTokens. Pass it to the
// resources the leader writes to.
func (ld *Leadership) Token() uint64 { return ld.lk.Token() }

// Done closes when the term ends: resigned, or lost (Err matches ErrLost),
// or the Locker closed.
func (ld *Leadership) Done() <-chan struct{} { return ld.lk.Done() }

// Err returns nil while the term lasts and after Resign; ErrLost after the
// term was lost; ErrClosed after the Locker closed.
func (ld *Leadership) Err() error { return ld.lk.Err() }

// Proclaim replaces the leader's value, which Leader and Observe then
// report, if this candidate is still the leader: a deposed leader's
// Proclaim changes nothing and returns an error matching ErrNotHeld. An
// error matching ErrUnavailable means the outcome is unknown.
func (ld *Leadership) Proclaim(ctx context.Context, value string) error {
	if ctx == nil {
		panic("padlock: Proclaim called with a nil Context")
	}
	if err := checkValue(ld.e.name, value); err != nil {
		return tidy(err)
	}
	h := ld.lk.h
	pr, ok := h.dh.(backends.Proclaimer)
	if !ok {
		return tidy(fmt.Errorf("proclaim %q: %w", h.name, ErrUnsupported))
	}
	select {
	case <-ld.lk.Done():
		return tidy(fmt.Errorf("proclaim %q: %w: the term is over: %w", h.name, ErrNotHeld, cmpErr(ld.lk.Err(), errors.New("resigned"))))
	default:
	}
	rctx, cancel := driverkit.WithRequestTimeout(ctx, 0)
	defer cancel()
	// Run as the hold's renewal: never beside one, nor beside its release.
	err := h.l.renew.runAsRenewal(rctx, h, func(ctx context.Context) (backends.Grant, error) {
		return backends.Grant{}, pr.Proclaim(ctx, value)
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotHeld):
		return tidy(fmt.Errorf("proclaim %q: %w", h.name, err))
	}
	return tidy(fmt.Errorf("proclaim %q: %w", h.name, driverkit.Unavailable("proclaim", err)))
}

// Resign ends the term: the next candidate may be elected at once. A
// deposed leader's Resign changes nothing and returns an error matching
// ErrNotHeld. It releases as Lock.Unlock does.
func (ld *Leadership) Resign(ctx context.Context) error {
	if ctx == nil {
		panic("padlock: Resign called with a nil Context")
	}
	return ld.lk.Unlock(ctx)
}

// Observe sends the election's leader now (the zero Leader when there is
// none), then every change: a proclaimed value, a new term, and no leader
// within a TTL of a resignation or a loss. Leaders arrive in term order:
// never a deposed leader's value after its successor's. The channel holds
// the latest state only: a slow reader sees it, not a backlog. It closes
// when ctx ends or the Locker closes. Observe reads the leader again on
// each push of the backend (Watcher) and polls every third of the
// Locker's TTL in any case.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	if ctx == nil {
		panic("padlock: Observe called with a nil Context")
	}
	out := make(chan Leader, 1)
	if err := e.l.enter(); err != nil {
		close(out)
		return out
	}
	e.l.bg.Go(func() {
		e.l.calls.Done() // entered only to fail on a closed Locker
		defer close(out)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(e.l.ctx, cancel)
		defer stop()
		e.observe(ctx, out)
	})
	return out
}

// observe is Observe's loop.
func (e *Election) observe(ctx context.Context, out chan Leader) {
	var signal <-chan struct{}
	if w, ok := e.l.drv.(backends.Watcher); ok && validateName(e.name) == nil {
		if ch, err := w.Watch(ctx, e.name); err == nil {
			signal = ch
		}
	}
	poll := time.NewTicker(max(e.l.defaults.ttl/3, 10*time.Millisecond))
	defer poll.Stop()
	var (
		last    Leader
		term    uint64 // the greatest term token seen
		sent    bool
		earlier Leader // a leader of a lower term read once: believed when read again
	)
	for {
		ld, err := e.leader(ctx)
		switch {
		case errors.Is(err, ErrNoLeader):
			ld, err = Leader{}, nil
		case err != nil && (errors.Is(err, ErrInvalidName) || errors.Is(err, ErrUnsupported) || errors.Is(err, ErrClosed)):
			return
		}
		// A lower term than one seen is a read that raced a newer grant,
		// and is dropped; unless two reads in a row agree on it: the
		// backend lost its counter (a restart without persistence, a
		// failover to a replica behind), and tokens start again below
		// those seen (tokens rise only while the backend keeps its state).
		stale := e.l.caps.MonotonicTokens && ld.Token != 0 && ld.Token < term
		if err == nil && stale {
			if ld == earlier {
				stale, term = false, 0
			} else {
				earlier = ld
			}
		} else if err == nil {
			earlier = Leader{}
		}
		if err == nil && !stale && (!sent || ld != last) {
			select { // the latest state only: replace what was not read
			case <-out:
			default:
			}
			out <- ld
			last, sent, term = ld, true, max(term, ld.Token)
		}
		select {
		case <-ctx.Done():
			return
		case _, ok := <-signal:
			if !ok {
				signal = nil // a watch that ended early: poll from now on
			}
		case <-poll.C:
		}
	}
}

// checkValue refuses a value that not every backend can store.
func checkValue(name, value string) error {
	if len(value) > MaxValueLen {
		return fmt.Errorf("%w: election %q: a value of %d bytes, longer than MaxValueLen (%d)", ErrInvalidOption, name, len(value), MaxValueLen)
	}
	return nil
}

func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}
