package padlock

import (
	"context"
	"testing"
	"time"

	"github.com/padlock-go/padlock/backends"
)

// slowProclaims is a driver of elections whose Proclaim waits until the
// test lets it return (proceed), and whose renewals wait until the test
// lets them (renew): the test sees the renewal loop's schedule between
// the two.
type slowProclaims struct {
	proceed chan struct{}
	renew   chan struct{}
}

func (d *slowProclaims) Acquire(_ context.Context, req backends.Request) (backends.Hold, error) {
	return &slowProclaimHold{d: d, ttl: req.TTL, sent: time.Now()}, nil
}
func (d *slowProclaims) Capabilities() backends.Capabilities {
	return backends.Capabilities{Consistency: backends.CP, MinTTL: time.Millisecond, Elections: true}
}
func (d *slowProclaims) Close(context.Context) error { return nil }
func (d *slowProclaims) Leader(context.Context, string) (backends.Leader, bool, error) {
	return backends.Leader{}, false, nil
}

type slowProclaimHold struct {
	d    *slowProclaims
	ttl  time.Duration
	sent time.Time
}

func (h *slowProclaimHold) Token() uint64         { return 1 }
func (h *slowProclaimHold) Grant() backends.Grant { return backends.Grant{Sent: h.sent, TTL: h.ttl} }
func (h *slowProclaimHold) Renew(ctx context.Context) (backends.Grant, error) {
	sent := time.Now()
	select {
	case <-h.d.renew:
	case <-ctx.Done():
		return backends.Grant{}, backends.ErrUnavailable
	}
	return backends.Grant{Sent: sent, TTL: h.ttl}, nil
}
func (h *slowProclaimHold) Release(context.Context) error { return nil }
func (h *slowProclaimHold) Proclaim(ctx context.Context, _ string) error {
	select {
	case <-h.d.proceed:
		return nil
	case <-ctx.Done():
		return backends.ErrUnavailable
	}
}

// A Proclaim runs in place of its hold's renewal (runAsRenewal), and
// renews nothing. When the renewal comes due while it runs, the renewal
// goes out as soon as it returns. It used to be counted from the
// Proclaim's return as if the hold had just been renewed: a third of
// what was left of the lease later, which a slow Proclaim may have all
// but used up.
func TestRenewalDueDuringProclaimGoesOutAtOnce(t *testing.T) {
	d := &slowProclaims{proceed: make(chan struct{}), renew: make(chan struct{})}
	l, err := NewLocker(d, WithTTL(6*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	defer close(d.renew) // let the renewal return before Close
	ctx := context.Background()
	ld, err := l.Election("slow").Campaign(ctx, "v1")
	if err != nil {
		t.Fatal(err)
	}
	h := ld.lk.h
	proclaimed := make(chan error, 1)
	go func() { proclaimed <- ld.Proclaim(ctx, "v2") }()
	fellDue := func() bool {
		l.renew.mu.Lock()
		defer l.renew.mu.Unlock()
		return h.sched.fellDue
	}
	for end := time.Now().Add(30 * time.Second); !fellDue(); time.Sleep(5 * time.Millisecond) { // polled: the loop sets it
		if time.Now().After(end) {
			t.Fatal("the renewal never came due while Proclaim ran (30s)")
		}
	}
	close(d.proceed)
	if err := <-proclaimed; err != nil {
		t.Fatal(err)
	}
	// The renewal waits in the driver (renew is not closed yet), so the
	// schedule says what Proclaim's return left it: renewing already, or
	// due now; not a part of the lease later.
	l.renew.mu.Lock()
	renewing, at := h.sched.renewing, h.sched.at
	l.renew.mu.Unlock()
	if !renewing && at.After(time.Now()) {
		t.Errorf("after a Proclaim that ran past its renewal's time, the renewal is %v away, want at once", time.Until(at).Round(time.Millisecond))
	}
}
