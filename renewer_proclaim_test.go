package padlock

import (
	"context"
	"sync/atomic"
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

	proclaims atomic.Int32 // Proclaims begun
	renews    atomic.Int32 // renewals begun
	before    atomic.Int32 // Proclaims begun before the first renewal began, plus one
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
	h.d.before.CompareAndSwap(0, h.d.proclaims.Load()+1)
	h.d.renews.Add(1)
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
	h.d.proclaims.Add(1)
	select {
	case <-h.d.proceed:
		return nil
	case <-ctx.Done():
		return backends.ErrUnavailable
	}
}

// A Proclaim runs in place of its hold's renewal (runAsRenewal), and
// renews nothing. When the renewal comes due while it runs, the renewal
// goes out as soon as it returns, before it returns to its caller and
// before another Proclaim waiting for it. It used to be counted from the
// Proclaim's return as if the hold had just been renewed, a third of what
// was left of the lease later, which a slow Proclaim may have all but
// used up; and a Proclaim that followed at once took its place again, so
// that back-to-back Proclaims kept the renewal from ever going out.
func TestRenewalDueDuringProclaimGoesOutAtOnce(t *testing.T) {
	d := &slowProclaims{proceed: make(chan struct{}), renew: make(chan struct{})}
	l, err := NewLocker(d, WithTTL(6*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	ld, err := l.Election("slow").Campaign(ctx, "v1")
	if err != nil {
		t.Fatal(err)
	}
	h := ld.lk.h
	first, second := make(chan error, 1), make(chan error, 1)
	go func() { first <- ld.Proclaim(ctx, "v2") }()
	poll := func(what string, cond func() bool) { // polled: the renewal loop and the Proclaims set what it reads
		t.Helper()
		for end := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: not within 30s", what)
			}
		}
	}
	poll("the renewal coming due while Proclaim runs", func() bool {
		l.renew.mu.Lock()
		defer l.renew.mu.Unlock()
		return h.sched.fellDue
	})
	// A second Proclaim, which waits for the first.
	go func() { second <- ld.Proclaim(ctx, "v3") }()
	close(d.proceed)
	poll("the renewal begun", func() bool { return d.renews.Load() > 0 })
	if n := d.before.Load() - 1; n != 1 {
		t.Errorf("%d Proclaims began before the renewal that came due during the first, want 1 (the first)", n)
	}
	waits := []chan error{first, second}
	select {
	case err := <-first:
		t.Errorf("the first Proclaim returned (%v) before the renewal that came due during it did", err)
		waits = waits[1:]
	default:
	}
	close(d.renew)
	for _, c := range waits {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
}
