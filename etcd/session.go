package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// session is one lease shared by every key a Locker puts with one TTL.
//
// Its keeper goroutine is the lease's one renewer, as concurrency.Session's
// is: while anyone relies on the lease (a hold, an acquisition under way, a
// waiter whose queue key is bound to it) it sends a keep-alive at a third of
// the last grant, and publishes every grant. A hold's Renew (the portable
// renewal loop's, for every hold of the session at once) asks the keeper
// for a grant newer than the one it has, and waits for the next keep-alive;
// waiters only register. Many holds and waiters cost one keep-alive per
// period. A lease nobody relies on is left to expire: an idle Locker keeps
// no lease alive.
type session struct {
	d    *driver
	id   clientv3.LeaseID
	kick chan struct{}   // wakes the keeper: look at want and users again
	lost context.Context // done when the lease is dead (expired, revoked or retired)
	lose context.CancelFunc

	mu       sync.Mutex
	grant    backends.Grant // the latest acknowledged grant
	dead     bool
	users    int           // holds, acquisitions and waiters relying on the lease
	parked   bool          // the keeper sleeps until poked: nobody relied on the lease
	want     bool          // a Renew waits for a keep-alive: send one now
	attempts int           // keep-alives finished, acknowledged or not
	lastErr  error         // the failure of the last keep-alive, if it failed
	changed  chan struct{} // closed and replaced at every finished keep-alive

	// suspects are the keys whose put on this lease had an unknown
	// outcome (orphans.go): the put may still be applied after its
	// clean-up found nothing. A session with suspects takes no new user,
	// looks for them after every keep-alive, and is revoked once idle.
	suspects map[string]slotKey
	checking bool // a look for the suspects is under way

	// held indexes the session's live holds by key, for lostFromLease:
	// kept as holds come and go, so that checking thousands of holds
	// against the lease's keys builds nothing per renewal.
	heldMu sync.Mutex
	held   map[string]*hold
	checks uint64 // lostFromLease calls so far, under heldMu
}

// track adds h to the session's index of live holds.
func (s *session) track(h *hold) {
	s.heldMu.Lock()
	if s.held == nil {
		s.held = map[string]*hold{}
	}
	s.held[h.k.key] = h
	s.heldMu.Unlock()
}

// untrack removes h from the index, unless a later hold of the same slot
// (the same key) has replaced it there.
func (s *session) untrack(h *hold) {
	s.heldMu.Lock()
	if s.held[h.k.key] == h {
		delete(s.held, h.k.key)
	}
	s.heldMu.Unlock()
}

// session returns a live session for ttl, granting a new lease when there is
// none or the current one can no longer be relied on. The caller relies on
// it until it calls done once (a hold hands that on to its Release).
func (d *driver) session(ctx context.Context, ttl time.Duration) (*session, error) {
	if s := d.liveSession(ttl); s != nil {
		return s, nil
	}
	// Another acquisition's Grant may be slow (an outage): this one waits
	// for it no longer than its own context allows.
	select {
	case d.granting <- struct{}{}:
	case <-ctx.Done():
		return nil, driverkit.RequestError(ctx, "etcd grant lease", context.Cause(ctx))
	}
	defer func() { <-d.granting }()
	if s := d.liveSession(ttl); s != nil {
		return s, nil
	}
	secs := int64((ttl + time.Second - 1) / time.Second) // etcd grants whole seconds
	sent := time.Now()
	var resp *clientv3.LeaseGrantResponse
	err := d.call(ctx, "grant lease", func(ctx context.Context) (err error) {
		resp, err = d.cli.Grant(ctx, secs)
		return err
	})
	if err != nil {
		return nil, err
	}
	s := &session{d: d, id: resp.ID, kick: make(chan struct{}, 1),
		changed: make(chan struct{}), users: 1,
		grant: backends.Grant{Sent: sent, TTL: time.Duration(resp.TTL) * time.Second}}
	s.lost, s.lose = context.WithCancel(context.Background())
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sessions == nil {
		s.revokeInBackground()
		return nil, backends.ErrClosed
	}
	d.bg.Go(s.keep)
	if old := d.sessions[ttl]; old != nil {
		// New acquisitions go to the new lease. The old one keeps its
		// keeper for the holds and waiters still on it (it was replaced
		// for want of headroom, not because it failed) unless it can no
		// longer be relied on at all: then it is retired, with no more
		// keep-alives, so it expires on the server no earlier than its
		// last grant promised. Revoking it now would delete its keys
		// before the holds on it have surely seen their Done close,
		// eating the safety margin.
		if !old.usable() {
			old.retire()
		}
		// Keep for Close only the retired leases that may still be alive
		// on the server: an idle Locker retires one after every idle spell,
		// and those that expired have nothing left to revoke.
		var live []*session
		for _, r := range append(d.retired, old) {
			if time.Now().Before(r.currentGrant().Expiry()) {
				live = append(live, r)
			}
		}
		d.retired = live
	}
	d.sessions[ttl] = s
	return s, nil
}

func (d *driver) liveSession(ttl time.Duration) *session {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.sessions[ttl]
	if s == nil || !s.use() {
		return nil
	}
	return s
}

// use registers one more user if the session is usable with room to
// spare: a third of its lease, so that the keep-alive a new user may need
// has time to land before the deadline. (An idle lease nearer its end is
// replaced by a new one.)
func (s *session) use() bool {
	s.mu.Lock()
	ok := !s.dead && len(s.suspects) == 0 && time.Until(s.grant.Deadline()) > s.grant.TTL/3
	if ok {
		s.users++
	}
	wake := ok && s.parked
	if wake {
		s.parked = false
	}
	s.mu.Unlock()
	if wake {
		s.poke() // the keeper sleeps while idle: its schedule starts now
	}
	return ok
}

// done ends one use of the session.
func (s *session) done() {
	s.mu.Lock()
	s.users--
	s.mu.Unlock()
}

func (s *session) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// usable reports whether keys bound to the lease can still be relied on:
// the server has not said it is gone and its last grant has not run out.
func (s *session) usable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.dead && time.Now().Before(s.grant.Deadline())
}

// retire ends a replaced session, and its keeper: no more keep-alives, so
// the lease expires on the server no earlier than its last grant promised.
func (s *session) retire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dieLocked()
}

func (s *session) dieLocked() {
	if !s.dead {
		s.dead = true
		s.lose()
		close(s.changed)
		s.changed = make(chan struct{})
	}
}

func (s *session) currentGrant() backends.Grant {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.grant
}

// keep is the keeper: the lease's one renewer, until the lease is dead,
// its last grant ran out, or the driver closes.
func (s *session) keep() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		s.mu.Lock()
		if s.dead {
			s.mu.Unlock()
			return
		}
		g, users, failing := s.grant, s.users, s.lastErr != nil
		s.parked = users == 0
		// Idle, with suspects (it takes no new user): revoked now, it
		// takes whatever orphan it may keep with it, and a put still on
		// its way finds no lease to attach to. Decided and retired under
		// the one lock: a user that came after users was read could rely
		// on a lease revoked under it.
		revoke := users == 0 && len(s.suspects) > 0
		if revoke {
			s.dieLocked()
		}
		s.mu.Unlock()
		if revoke {
			s.revokeInBackground()
			return
		}
		if !time.Now().Before(g.Deadline()) {
			// No keep-alive was acknowledged in time: whatever the server
			// did, nothing may rely on this lease any more.
			s.retire()
			return
		}
		switch {
		case users == 0:
			// Idle: only a kick wakes it, or its deadline, where it ends
			// (above) if nothing used it since; a session replaced for
			// want of headroom (session) is never kicked again.
			t.Reset(max(time.Until(g.Deadline()), 0))
		case failing:
			t.Reset(min(g.TTL/10, 50*time.Millisecond)) // retry soon, not in a tight loop
		default:
			t.Reset(max(time.Until(g.Sent.Add(g.TTL/3)), 0))
		}
		select {
		case <-s.d.ctx.Done():
			return
		case <-s.lost.Done():
			return // retired while idle
		case <-s.kick:
			if !t.Stop() {
				<-t.C
			}
			s.mu.Lock()
			now := s.want && s.users > 0
			s.want = false
			s.mu.Unlock()
			if !now {
				continue // a new user: the schedule may have changed
			}
		case <-t.C:
			s.mu.Lock()
			users = s.users
			s.mu.Unlock()
			if users == 0 {
				continue // the last user left while it slept
			}
		}
		if s.keepAlive(g) {
			s.lookForOrphans()
		}
	}
}

// keepAlive sends one keep-alive, bounded by the grant's deadline, and
// publishes what came of it: whether the lease was renewed.
func (s *session) keepAlive(g backends.Grant) bool {
	ctx, cancel := context.WithDeadline(s.d.ctx, g.Deadline())
	defer cancel()
	sent := time.Now()
	var resp *clientv3.LeaseKeepAliveResponse
	err := s.d.call(ctx, "keep-alive", func(ctx context.Context) (err error) {
		resp, err = s.d.cli.KeepAliveOnce(ctx, s.id)
		return err
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return false // retired meanwhile: a late answer must not revive it
	}
	s.attempts++
	s.lastErr = nil
	switch {
	case err == nil:
		if ng := (backends.Grant{Sent: sent, TTL: time.Duration(resp.TTL) * time.Second}); ng.Expiry().After(s.grant.Expiry()) {
			s.grant = ng
		}
		// Every Renew waiting now had an older grant: this one serves it,
		// and no second keep-alive is needed for it.
		s.want = false
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		s.dieLocked()
		return false
	default:
		s.lastErr = err
	}
	close(s.changed)
	s.changed = make(chan struct{})
	return err == nil
}

// renew returns a grant acknowledged after have was sent: the latest one if
// it is newer, else the outcome of the next keep-alive, which it asks the
// keeper to send now.
func (s *session) renew(ctx context.Context, have backends.Grant) (backends.Grant, error) {
	s.mu.Lock()
	start := s.attempts
	s.mu.Unlock()
	for {
		s.mu.Lock()
		switch {
		case s.dead:
			s.mu.Unlock()
			return backends.Grant{}, fmt.Errorf("%w: etcd lease %x expired or was revoked", backends.ErrNotHeld, int64(s.id))
		case s.grant.Sent.After(have.Sent):
			g := s.grant
			s.mu.Unlock()
			return g, nil
		case s.attempts > start && s.lastErr != nil:
			err := s.lastErr
			s.mu.Unlock()
			return backends.Grant{}, err
		}
		changed := s.changed
		s.want = true
		s.mu.Unlock()
		s.poke()
		select {
		case <-changed:
		case <-ctx.Done():
			return backends.Grant{}, ctx.Err()
		}
	}
}

func (s *session) revoke(ctx context.Context) error {
	return s.d.call(ctx, "revoke lease", func(ctx context.Context) error {
		_, err := s.d.cli.Revoke(ctx, s.id)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return nil
		}
		return err
	})
}

// revokeInBackground revokes a lease nobody will use without delaying the
// caller; if it cannot, the lease expires by itself since nothing renews it.
func (s *session) revokeInBackground() {
	s.d.janitor.Go(s.revoke)
}
