package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/backends"
)

// session is one lease shared by every key a Locker puts with one TTL.
// padlock's watchdog renews it through each hold; renewals are coalesced so
// that many holds cost one keep-alive per period, not one each.
type session struct {
	d  *driver
	id clientv3.LeaseID

	mu     sync.Mutex
	grant  backends.Grant // the latest acknowledged grant
	dead   bool           // the server said the lease is gone
	flight *renewal       // the keep-alive in flight, if any
}

type renewal struct {
	done  chan struct{}
	grant backends.Grant
	err   error
}

// session returns a live session for ttl, granting a new lease when there is
// none or the current one can no longer be relied on.
func (d *driver) session(ctx context.Context, ttl time.Duration) (*session, error) {
	if s := d.liveSession(ttl); s != nil {
		return s, nil
	}
	d.granting.Lock()
	defer d.granting.Unlock()
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
	s := &session{d: d, id: resp.ID,
		grant: backends.Grant{Sent: sent, TTL: time.Duration(resp.TTL) * time.Second}}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sessions == nil {
		s.revokeInBackground()
		return nil, padlock.ErrClosed
	}
	if old := d.sessions[ttl]; old != nil {
		// Retire the old lease: no more keep-alives, so it expires on the
		// server no earlier than its last grant promised. Revoking it now
		// would delete its keys before the holds on it have surely seen
		// their Done close, eating the safety margin.
		old.retire()
		d.retired = append(d.retired, old)
	}
	d.sessions[ttl] = s
	return s, nil
}

func (d *driver) liveSession(ttl time.Duration) *session {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.sessions[ttl]
	if s == nil || !s.usable() {
		return nil
	}
	return s
}

// usable reports whether new keys may still be bound to the lease: the
// server has not said it is gone and its last grant has not run out.
func (s *session) usable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.dead && time.Now().Before(s.grant.Expiry().Add(-padlock.SafetyMargin(s.grant.TTL)))
}

// retire stops all renewal of a replaced session, including one in flight.
func (s *session) retire() {
	s.mu.Lock()
	s.dead = true
	s.mu.Unlock()
}

func (s *session) currentGrant() backends.Grant {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.grant
}

// renew sends one keep-alive, or joins the one in flight, or returns the
// latest grant if it was acknowledged a moment ago.
func (s *session) renew(ctx context.Context) (backends.Grant, error) {
	s.mu.Lock()
	switch {
	case s.dead:
		s.mu.Unlock()
		return backends.Grant{}, fmt.Errorf("%w: etcd lease %x expired or was revoked", backends.ErrNotHeld, int64(s.id))
	case time.Since(s.grant.Sent) < s.grant.TTL/10:
		g := s.grant
		s.mu.Unlock()
		return g, nil
	case s.flight != nil:
		f := s.flight
		s.mu.Unlock()
		select {
		case <-f.done:
			return f.grant, f.err
		case <-ctx.Done():
			return backends.Grant{}, ctx.Err()
		}
	}
	f := &renewal{done: make(chan struct{})}
	s.flight = f
	s.mu.Unlock()

	sent := time.Now()
	var resp *clientv3.LeaseKeepAliveResponse
	err := s.d.call(ctx, "keep-alive", func(ctx context.Context) (err error) {
		resp, err = s.d.cli.KeepAliveOnce(ctx, s.id)
		return err
	})

	s.mu.Lock()
	defer s.mu.Unlock()
	s.flight = nil
	switch {
	case s.dead:
		// Retired while the keep-alive was in flight: it must not bring the
		// session back to life.
		f.err = fmt.Errorf("%w: etcd lease %x was retired", backends.ErrNotHeld, int64(s.id))
	case err == nil:
		g := backends.Grant{Sent: sent, TTL: time.Duration(resp.TTL) * time.Second}
		if g.Expiry().After(s.grant.Expiry()) {
			s.grant = g
		}
		f.grant = g
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		s.dead = true
		f.err = fmt.Errorf("%w: etcd lease %x expired or was revoked", backends.ErrNotHeld, int64(s.id))
	default:
		f.err = err
	}
	close(f.done)
	return f.grant, f.err
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
