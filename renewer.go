package padlock

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// SafetyMargin returns how long before the server may expire a lease of
// the given TTL the renewal loop gives the hold up: TTL/20 plus 50ms. It
// covers a relative clock-rate drift between client and server of up to 5%
// and the delay between the deadline and the moment Done is observed.
//
// The lost-lock rule: Done closes no later than
//
//	(send time of the last renewal the server acknowledged) + TTL − SafetyMargin(TTL)
//
// where TTL is the lease the server actually granted. The server cannot
// expire the lease before send time + TTL, so Done closes before anyone else
// can acquire the lock, as long as clock drift stays within the margin. It
// is backends.SafetyMargin, the policy the drivers follow too.
func SafetyMargin(ttl time.Duration) time.Duration { return backends.SafetyMargin(ttl) }

// renewal is when a hold under grant g, received at now, is renewed next:
// once a third of what is left of its lease has passed. For a grant that
// starts as its request is sent, that is a third of the TTL; a grant that
// starts earlier (a ZooKeeper session's certified time) is renewed sooner.
func renewal(g backends.Grant, now time.Time) time.Time {
	return now.Add(g.Expiry().Sub(now) / 3)
}

// renewer is the one renewal loop of a Locker: every hold is in its heap,
// keyed by its next event. A hold is renewed at a third of its grant; the
// holds that are due together go out in one batch (one call for a driver
// that implements backends.BatchRenewer), on one goroutine. While a renewal
// is in flight the hold's event is its deadline, so Done closes at the
// deadline even if the renewal never returns (a client library that ignores
// its context, a silent network).
type renewer struct {
	l *Locker

	mu     sync.Mutex
	heap   holdHeap
	timer  *time.Timer // fires at nextAt; reset, never poked, when an earlier event arrives
	nextAt time.Time
}

// schedule is one hold's state in the renewal loop, guarded by renewer.mu.
type schedule struct {
	index    int            // position in the heap; -1 when not scheduled
	at       time.Time      // next event: a renewal, or the deadline while one is in flight
	grant    backends.Grant // the latest acknowledged grant
	failures int            // renewals in a row that failed without an answer
	renewing chan struct{}  // non-nil while a renewal is in flight; closed when it returns
}

func newRenewer(l *Locker) *renewer {
	return &renewer{l: l, timer: time.NewTimer(time.Hour), nextAt: time.Now().Add(time.Hour)}
}

// add schedules a newly acquired hold, unless it has ended already (a
// Close or an Unlock that came first): a hold that ended is never renewed,
// so no renewal can overlap its release. Lock order: h.mu, then r.mu.
func (r *renewer) add(h *hold) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return
	}
	r.mu.Lock()
	h.sched.grant = h.dh.Grant()
	h.sched.at = renewal(h.sched.grant, time.Now())
	heap.Push(&r.heap, h)
	r.scheduleLocked()
	r.mu.Unlock()
}

// remove takes an ended hold off the loop. A renewal in flight goes on;
// inFlight tells the release to wait for it.
func (r *renewer) remove(h *hold) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h.sched.index >= 0 {
		heap.Remove(&r.heap, h.sched.index)
	}
}

// inFlight returns a channel that closes when the hold's renewal in flight
// returns, or nil if there is none.
func (r *renewer) inFlight(h *hold) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h.sched.renewing == nil {
		return nil
	}
	return h.sched.renewing
}

// runAsRenewal runs op (a change of the hold on the server, such as
// Sharer.Share) in place of the hold's renewal: after the renewal in
// flight, if any, has returned, with no renewal starting until op returns,
// bounded by ctx and by the hold's deadline; op's grant and error are
// then applied as a renewal's (ErrNotHeld ends the hold with ErrLost). It
// returns ErrNotHeld for a hold that has ended.
func (r *renewer) runAsRenewal(ctx context.Context, h *hold, op func(context.Context) (backends.Grant, error)) error {
	var deadline time.Time
	for {
		r.mu.Lock()
		if h.sched.index < 0 {
			r.mu.Unlock()
			return fmt.Errorf("%w: the hold ended", ErrNotHeld)
		}
		renewing := h.sched.renewing
		if renewing == nil {
			// Marked in flight: collect keeps watching the deadline and
			// starts no renewal.
			h.sched.renewing = make(chan struct{})
			deadline = h.sched.grant.Deadline()
			r.mu.Unlock()
			break
		}
		r.mu.Unlock()
		select {
		case <-renewing:
		case <-ctx.Done():
			return driverkit.Unavailable("renewal in flight", context.Cause(ctx))
		}
	}
	octx, cancel := context.WithDeadline(ctx, deadline)
	g, err := op(octx)
	cancel()
	r.apply([]*hold{h}, []backends.RenewResult{{Grant: g, Err: err}})
	return err
}

// scheduleLocked moves the loop's timer earlier when the heap's first event
// now comes before it. Resetting the timer, rather than waking the loop,
// costs an acquisition no goroutine switch. r.mu must be held.
func (r *renewer) scheduleLocked() {
	if len(r.heap) == 0 {
		return
	}
	if at := r.heap[0].sched.at; at.Before(r.nextAt) {
		r.nextAt = at
		r.timer.Reset(time.Until(at))
	}
}

// loop runs until the Locker closes.
func (r *renewer) loop() {
	defer r.timer.Stop()
	for {
		due, lost := r.collect(time.Now())
		for _, loss := range lost {
			if loss.h.end(loss.cause) {
				loss.h.releaseInBackground()
			}
		}
		if len(due) > 0 {
			r.l.bg.Go(func() { r.renewBatch(due) })
		}
		select {
		case <-r.l.ctx.Done():
			return
		case <-r.timer.C:
		}
	}
}

// holdLoss is a hold the renewal loop found lost, and why: the loop ends
// it with that cause (Done closes, Err says ErrLost) outside its lock.
type holdLoss struct {
	h     *hold
	cause error
}

// collect takes the holds whose event has come: those past their deadline
// are lost, the others are due for renewal, and so are those whose renewal
// would come within a tenth of their TTL anyway (coalescing holds acquired
// close together into one batch). It sets the timer for the next event.
func (r *renewer) collect(now time.Time) (due []*hold, lost []holdLoss) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.heap) > 0 {
		h := r.heap[0]
		s := &h.sched
		early := s.renewing == nil && len(due) > 0 && s.at.Sub(now) <= s.grant.TTL/10
		if s.at.After(now) && !early {
			break
		}
		// A hold that stays in the heap moves to its new event in place
		// (one sift instead of a pop and a push: a Locker with many holds
		// does this for each of them at every renewal).
		switch {
		case !now.Before(s.grant.Deadline()) && s.renewing != nil:
			heap.Pop(&r.heap)
			lost = append(lost, holdLoss{h, fmt.Errorf("%w: renewal still unanswered at the lease deadline (%v lease)", ErrLost, s.grant.TTL)})
		case !now.Before(s.grant.Deadline()):
			heap.Pop(&r.heap)
			lost = append(lost, holdLoss{h, fmt.Errorf("%w: no renewal acknowledged within the %v lease", ErrLost, s.grant.TTL)})
		case s.renewing != nil:
			s.at = s.grant.Deadline() // woken early: keep watching the deadline
			heap.Fix(&r.heap, 0)
		default:
			s.renewing = make(chan struct{})
			s.at = s.grant.Deadline()
			heap.Fix(&r.heap, 0)
			due = append(due, h)
		}
	}
	r.nextAt = time.Now().Add(time.Hour)
	if len(r.heap) > 0 {
		r.nextAt = r.heap[0].sched.at
	}
	r.timer.Reset(time.Until(r.nextAt))
	return due, lost
}

// renewBatch renews holds: in one call for a driver that can batch, or one
// call per hold, each on its own goroutine and applied as it returns, so
// that one renewal that hangs holds up no other hold. Holds that ended
// since collect took them are not renewed.
func (r *renewer) renewBatch(hs []*hold) {
	r.mu.Lock()
	live := hs[:0:0]
	latest := time.Time{}
	for _, h := range hs {
		if h.sched.index < 0 { // ended meanwhile: nothing to renew
			close(h.sched.renewing)
			h.sched.renewing = nil
			continue
		}
		live = append(live, h)
		latest = later(latest, h.sched.grant.Deadline())
	}
	r.mu.Unlock()
	if len(live) == 0 {
		return
	}
	br, batch := r.l.drv.(backends.BatchRenewer)
	if !batch || len(live) == 1 {
		for _, h := range live[1:] {
			r.l.bg.Go(func() { r.renewOne(h) })
		}
		r.renewOne(live[0])
		return
	}
	ctx, cancel := context.WithDeadline(r.l.ctx, latest)
	dhs := make([]backends.Hold, len(live))
	for i, h := range live {
		dhs[i] = h.dh
	}
	results := br.RenewBatch(ctx, dhs)
	cancel()
	if n := len(results); n != len(live) {
		// A driver that breaks the contract: no result can be trusted.
		results = make([]backends.RenewResult, len(live))
		for i := range results {
			results[i].Err = fmt.Errorf("%w: driver returned %d results for %d holds", ErrUnavailable, n, len(live))
		}
	}
	r.apply(live, results)
}

// renewOne renews one hold, bounded by its own deadline.
func (r *renewer) renewOne(h *hold) {
	r.mu.Lock()
	d := h.sched.grant.Deadline()
	r.mu.Unlock()
	ctx, cancel := context.WithDeadline(r.l.ctx, d)
	var res backends.RenewResult
	res.Grant, res.Err = h.dh.Renew(ctx)
	cancel()
	r.apply([]*hold{h}, []backends.RenewResult{res})
}

// apply records renewal results, reschedules the holds, and ends those the
// server says are gone.
func (r *renewer) apply(hs []*hold, results []backends.RenewResult) {
	var (
		lost     []holdLoss
		failed   []error
		ok       int
		repeated []*hold // failed three times running: an operator should know
	)
	r.mu.Lock()
	now := time.Now()
	for i, h := range hs {
		s := &h.sched
		close(s.renewing)
		s.renewing = nil
		if s.index < 0 {
			continue // ended, or lost at its deadline, meanwhile
		}
		res := results[i]
		switch {
		case res.Err == nil:
			ok++
			if res.Grant.Expiry().After(s.grant.Expiry()) {
				s.grant = res.Grant
			}
			s.failures = 0
			// Never later than the deadline, whatever the grant says.
			s.at = earlier(later(renewal(s.grant, now), now.Add(s.grant.TTL/20)), s.grant.Deadline())
		case errors.Is(res.Err, ErrNotHeld):
			heap.Remove(&r.heap, s.index)
			lost = append(lost, holdLoss{h, fmt.Errorf("%w: %w", ErrLost, res.Err)})
			continue
		default:
			// Retry soon, but not in a tight loop, and never past the deadline.
			s.failures++
			retry := now.Add(min(s.grant.TTL/10, time.Duration(s.failures)*20*time.Millisecond))
			s.at = earlier(retry, s.grant.Deadline())
			failed = append(failed, res.Err)
			if s.failures == 3 {
				repeated = append(repeated, h)
			}
		}
		heap.Fix(&r.heap, s.index)
	}
	r.scheduleLocked()
	r.mu.Unlock()
	r.l.tel.renewed(ok, len(failed), len(lost))
	for _, err := range failed { // a user's log handler never runs under r.mu
		r.l.log.Debug("padlock: renewal failed; retrying", "err", err)
	}
	for _, h := range repeated {
		r.l.log.Warn("padlock: renewals keep failing; the lock is lost at its deadline unless one succeeds", "lock", h.name, "token", h.token)
	}
	for _, loss := range lost {
		if loss.h.end(loss.cause) {
			loss.h.releaseInBackground()
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// holdHeap orders holds by their next event.
type holdHeap []*hold

func (q holdHeap) Len() int           { return len(q) }
func (q holdHeap) Less(i, j int) bool { return q[i].sched.at.Before(q[j].sched.at) }
func (q holdHeap) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].sched.index, q[j].sched.index = i, j
}
func (q *holdHeap) Push(x any) {
	h := x.(*hold)
	h.sched.index = len(*q)
	*q = append(*q, h)
}
func (q *holdHeap) Pop() any {
	old := *q
	h := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	h.sched.index = -1
	return h
}
