package padlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/padlock-go/padlock/backends"
)

// SafetyMargin returns how long before the server may expire a lease of
// the given TTL the watchdog gives the hold up: TTL/20 plus 50ms. It covers
// a relative clock-rate drift between client and server of up to 5% and the
// delay between the deadline and the moment the Done channel is observed.
//
// The lost-lock rule: Done closes no later than
//
//	(send time of the last renewal the server acknowledged) + TTL − SafetyMargin(TTL)
//
// where TTL is the lease the server actually granted. The server cannot
// expire the lease before send time + TTL, so Done closes before anyone else
// can acquire the lock, as long as clock drift stays within the margin.
func SafetyMargin(ttl time.Duration) time.Duration {
	return ttl/20 + 50*time.Millisecond
}

// watch is the renewal watchdog of one hold: it renews at a third of the
// granted TTL and closes Done when the lease deadline passes without an
// acknowledged renewal, or at once when the server says the hold is gone.
//
// The deadline is kept here, not by the driver: a renewal runs on its own
// goroutine, and Done closes at the deadline even if that renewal has not
// returned (a client library that ignores its context, a silent network).
func (h *hold) watch() {
	defer h.l.bg.Done()
	defer close(h.watchExited)
	g := h.drv.Grant()
	failures := 0
	for {
		deadline := g.Expiry().Add(-SafetyMargin(g.TTL))
		next := g.Sent.Add(g.TTL / 3)
		if failures > 0 {
			// Retry a failed renewal soon, but not in a tight loop.
			next = time.Now().Add(min(g.TTL/10, time.Duration(failures)*20*time.Millisecond))
		}
		if next.After(deadline) {
			next = deadline
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-h.stopped.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if !time.Now().Before(deadline) {
			h.lose(fmt.Errorf("%w: no renewal acknowledged within the %v lease", ErrLost, g.TTL))
			return
		}
		ng, err := h.renew(deadline)
		switch {
		case err == nil:
			if ng.Expiry().After(g.Expiry()) {
				g = ng
			}
			failures = 0
		case errors.Is(err, ErrNotHeld):
			h.lose(fmt.Errorf("%w: %w", ErrLost, err))
			return
		case errors.Is(err, errDeadline):
			return // renew closed Done at the deadline already
		default:
			failures++
		}
	}
}

// errDeadline says the lease deadline passed while a renewal was in flight.
var errDeadline = errors.New("lease deadline passed during renewal")

// renew calls the driver with a context that ends at the deadline or when
// the hold finishes. If the deadline passes first, it closes Done at once and
// returns errDeadline; the watchdog then exits without waiting for the
// driver, and a background goroutine releases the hold only after that
// renewal has returned, so a Release never races a Renew.
func (h *hold) renew(deadline time.Time) (backends.Grant, error) {
	ctx, cancel := context.WithDeadline(h.stopped, deadline)
	type result struct {
		g   backends.Grant
		err error
	}
	res := make(chan result, 1)
	go func() {
		g, err := h.drv.Renew(ctx)
		res <- result{g, err}
	}()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case r := <-res:
		cancel()
		return r.g, r.err
	case <-t.C:
		cancel()
		if h.end(fmt.Errorf("%w: renewal still unanswered at the lease deadline", ErrLost)) {
			h.l.inBackground(func() {
				<-res
				h.l.releaseInBackground(h.drv, h.name)
			})
		}
		return backends.Grant{}, errDeadline
	}
}
