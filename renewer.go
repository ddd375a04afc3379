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

// firstRenewal is when a hold (or a lease) newly acquired under grant g,
// received at now, is renewed first: at renewal(g, now), unless that
// falls on or after its deadline, as it does for a grant that arrives with
// less than 1.5 safety margins of its lease left (a slow answer, a session's
// aged certified time); such a grant is renewed at once. The stale-grant
// check refuses only one with a margin or less left, and an entry whose
// first event came after its deadline would be given up there, late, and
// without a renewal tried.
func firstRenewal(g backends.Grant, now time.Time) time.Time {
	if at := renewal(g, now); at.Before(g.Deadline()) {
		return at
	}
	return now
}

// renewer is the one renewal loop of a Locker: every hold is in its heap,
// keyed by its next event, or, when the driver's holds share a lease
// (backends.LeaseSharer), every lease is, with the holds under it. A hold
// or lease is renewed at a third of its grant; the entries that are due
// together go out in one batch (one call for a driver that implements
// backends.BatchRenewer), on one goroutine. While a renewal is in flight
// the entry's event is its deadline, so Done closes at the deadline even
// if the renewal never returns (a client library that ignores its
// context, a silent network).
type renewer struct {
	l  *Locker
	ls backends.LeaseSharer // the driver's, or nil

	mu     sync.Mutex
	heap   schedHeap
	leases map[any]*leaseGroup // by the driver's lease
	timer  *time.Timer         // fires at nextAt; reset, never poked, when an earlier event arrives
	nextAt time.Time
}

// schedule is one heap entry's state in the renewal loop, guarded by
// renewer.mu: a hold's (hold is set) or a lease's (lease is set). A hold
// under a lease is never in the heap itself: its lease is, and its own
// renewing marks an operation run in place of its renewal (runAsRenewal).
type schedule struct {
	index    int            // position in the heap; -1 when not scheduled
	at       time.Time      // next event: a renewal, or the deadline while one is in flight (set by setAt)
	atMono   time.Duration  // at, on the monotonic clock since epoch: what the heap compares
	grant    backends.Grant // the latest acknowledged grant
	failures int            // renewals in a row that failed without an answer
	renewing bool           // a renewal (or an operation in its place) is in flight
	fellDue  bool           // the renewal came due while an operation ran in its place (runAsRenewal)
	// done is made by the first caller that waits for the renewal in
	// flight (waitFor), and closed when it returns: most renewals have
	// nobody waiting, and make no channel.
	done chan struct{}

	hold  *hold       // the hold this schedules, or nil
	lease *leaseGroup // the lease this schedules, or nil
}

// waitFor returns a channel that closes when the renewal in flight
// returns, or nil if none is in flight. r.mu is held.
func (s *schedule) waitFor() <-chan struct{} {
	if !s.renewing {
		return nil
	}
	if s.done == nil {
		s.done = make(chan struct{})
	}
	return s.done
}

// finish ends the renewal in flight, waking whoever waits for it. r.mu is
// held.
func (s *schedule) finish() {
	s.renewing, s.fellDue = false, false
	if s.done != nil {
		close(s.done)
		s.done = nil
	}
}

// leaseGroup is the holds of one lease of the driver (backends.LeaseSharer),
// scheduled as one: renewing the lease renews all of them.
type leaseGroup struct {
	key     any
	sched   schedule
	members []*hold // hold.member is the position here

	// The renewal in flight's copy of members and of their driver holds
	// (one renewal of a lease at a time: sched.renewing), kept for the
	// next: a lease of thousands of holds allocates nothing per renewal.
	hs  []*hold
	dhs []backends.Hold
}

func newRenewer(l *Locker) *renewer {
	ls, _ := l.drv.(backends.LeaseSharer)
	return &renewer{l: l, ls: ls, leases: map[any]*leaseGroup{},
		timer: time.NewTimer(time.Hour), nextAt: time.Now().Add(time.Hour)}
}

// add schedules a newly acquired hold, unless it has ended already (a
// Close or an Unlock that came first): a hold that ended is never renewed,
// so no renewal can overlap its release. A hold under a lease joins the
// lease's entry (made for it if it is the lease's first). Lock order:
// h.mu, then r.mu.
func (r *renewer) add(h *hold) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return
	}
	var key any
	if r.ls != nil {
		key = r.ls.LeaseOf(h.dh)
	}
	g, now := h.dh.Grant(), time.Now()
	first := firstRenewal(g, now)
	r.mu.Lock()
	defer r.mu.Unlock()
	if key == nil {
		h.sched.hold = h
		h.sched.grant = g
		h.sched.setAt(first)
		heap.Push(&r.heap, &h.sched)
		r.scheduleLocked()
		return
	}
	lg := r.leases[key]
	if lg == nil {
		lg = &leaseGroup{key: key}
		lg.sched = schedule{index: -1, lease: lg, grant: g}
		lg.sched.setAt(first)
		r.leases[key] = lg
		heap.Push(&r.heap, &lg.sched)
		r.scheduleLocked()
	} else if g.Expiry().After(lg.sched.grant.Expiry()) {
		lg.sched.grant = g // a newer grant of the same lease
	}
	h.lease, h.member = lg, len(lg.members)
	lg.members = append(lg.members, h)
}

// expired reports whether h's last acknowledged grant (its lease's, for a
// hold under a shared lease) has run out by now: the loop closes its Done
// then, but a process paused or starved past the deadline may look before
// the loop has run.
func (r *renewer) expired(h *hold, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := h.sched.grant.Deadline()
	if h.lease != nil {
		d = h.lease.sched.grant.Deadline()
	}
	return !now.Before(d)
}

// remove takes an ended hold off the loop. A renewal in flight goes on;
// inFlight tells the release to wait for it. A lease whose last hold
// leaves is taken off too.
func (r *renewer) remove(h *hold) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h.lease != nil {
		r.leave(h)
		return
	}
	if h.sched.index >= 0 {
		heap.Remove(&r.heap, h.sched.index)
	}
}

// leave takes h out of its lease's holds, and the lease off the loop when
// it was the last; r.mu is held.
func (r *renewer) leave(h *hold) {
	lg := h.lease
	if h.member < 0 {
		return
	}
	last := len(lg.members) - 1
	lg.members[h.member] = lg.members[last]
	lg.members[h.member].member = h.member
	lg.members[last] = nil
	lg.members = lg.members[:last]
	h.member = -1
	if len(lg.members) == 0 && lg.sched.index >= 0 {
		heap.Remove(&r.heap, lg.sched.index)
		delete(r.leases, lg.key)
	}
}

// scheduled reports whether h is still on the loop; r.mu is held.
func (h *hold) scheduled() bool {
	if h.lease != nil {
		return h.member >= 0
	}
	return h.sched.index >= 0
}

// inFlight returns a channel that closes when the hold's renewal in flight
// returns, or nil if there is none. A lease's renewal touches none of its
// holds on the server (backends.LeaseSharer), so a hold under a lease
// waits only for an operation run in place of its renewal.
func (r *renewer) inFlight(h *hold) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return h.sched.waitFor()
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
		if !h.scheduled() {
			r.mu.Unlock()
			return fmt.Errorf("%w: the hold ended", ErrNotHeld)
		}
		renewing := h.sched.waitFor()
		if renewing == nil {
			// Marked in flight: collect keeps watching the deadline and
			// starts no renewal (a lease's renewal touches no hold, so
			// it goes on).
			h.sched.renewing = true
			deadline = h.sched.grant.Deadline()
			if h.lease != nil {
				deadline = h.lease.sched.grant.Deadline()
			}
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
	switch {
	case h.lease != nil:
		r.applyUnderLease(h, err)
	case err == nil && g.TTL == 0:
		r.renewedNothing(h)
	default:
		r.apply([]*hold{h}, []backends.RenewResult{{Grant: g, Err: err}})
	}
	return err
}

// renewedNothing ends an operation run in place of the renewal of h that
// extended nothing (Proclaim): the renewal keeps its time, or, if that
// came while the operation ran, goes out now, before the operation
// returns and before the next operation waiting for this one can take its
// place (back-to-back Proclaims would
// otherwise keep it from ever going out, and the term would be lost at
// its deadline). Counted from now as if renewed, it would get a third of
// what is left of the lease, which a slow operation may have all but
// used up.
func (r *renewer) renewedNothing(h *hold) {
	r.mu.Lock()
	s := &h.sched
	missed := s.fellDue
	s.finish()
	if s.index < 0 || !missed {
		r.mu.Unlock()
		return // ended meanwhile, or its renewal is still to come
	}
	// As collect starts a renewal: in flight, its event the deadline.
	s.renewing = true
	s.setAt(s.grant.Deadline())
	heap.Fix(&r.heap, s.index)
	r.scheduleLocked()
	r.mu.Unlock()
	// On the operation's goroutine: the operation's caller waits one
	// renewal more, and no goroutine outlives the call.
	r.renewOne(h)
}

// applyUnderLease ends an operation run in place of the renewal of h, a
// hold under a lease: the lease's renewals keep it, so only a verdict
// that it is gone counts.
func (r *renewer) applyUnderLease(h *hold, err error) {
	r.mu.Lock()
	h.sched.finish()
	lost := errors.Is(err, ErrNotHeld) && h.scheduled()
	if lost {
		r.leave(h)
	}
	r.mu.Unlock()
	if lost {
		r.l.tel.renewed(0, 0, 1)
		if h.end(fmt.Errorf("%w: %w", ErrLost, err)) {
			h.releaseInBackground()
		}
	}
}

// scheduleLocked moves the loop's timer earlier when the heap's first event
// now comes before it. Resetting the timer, rather than waking the loop,
// costs an acquisition no goroutine switch. r.mu must be held.
func (r *renewer) scheduleLocked() {
	if len(r.heap) == 0 {
		return
	}
	if at := r.heap[0].at; at.Before(r.nextAt) {
		r.nextAt = at
		r.timer.Reset(time.Until(at))
	}
}

// loop runs until the Locker closes.
func (r *renewer) loop() {
	defer r.timer.Stop()
	for {
		due, lost := r.collect(time.Now())
		if len(lost) > 0 {
			// Every lost hold's Done closes here, at once; what follows
			// (telemetry, a log handler, the releases) runs off the loop.
			if ended := closeLost(lost); len(ended) > 0 {
				r.l.bg.Go(func() { releaseLost(ended) })
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

// endLost ends the holds of lost, each with its cause, and releases them.
func endLost(lost []holdLoss) { releaseLost(closeLost(lost)) }

// closeLost is endLost's first step: it closes the Done of every hold of
// lost, one after the other with nothing in between, so that no hold's
// Done waits for the code run at the end of the holds before it (a
// provider's telemetry, a log handler: a lease of thousands of holds is
// lost at once). It returns those it ended, with the reason their Err
// gives, in lost's array.
func closeLost(lost []holdLoss) []holdLoss {
	ended := lost[:0]
	for _, loss := range lost {
		if reason, ok := loss.h.closeHandles(loss.cause); ok {
			ended = append(ended, holdLoss{loss.h, reason})
		}
	}
	return ended
}

// releaseLost is endLost's second step, for the holds closeLost ended:
// each one's end is recorded, and its release goes to the background.
func releaseLost(ended []holdLoss) {
	for _, e := range ended {
		e.h.afterEnd(e.cause)
		e.h.releaseInBackground()
	}
}

// collect takes the entries whose event has come: those past their
// deadline are lost (a lease with every hold under it), the others are
// due for renewal, and so are those whose renewal would come within a
// tenth of their TTL anyway (coalescing holds acquired close together
// into one batch). It sets the timer for the next event.
func (r *renewer) collect(now time.Time) (due []*schedule, lost []holdLoss) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.heap) > 0 {
		s := r.heap[0]
		early := !s.renewing && len(due) > 0 && s.at.Sub(now) <= s.grant.TTL/10
		if s.at.After(now) && !early {
			break
		}
		// An entry that stays in the heap moves to its new event in place
		// (one sift instead of a pop and a push).
		switch {
		case !now.Before(s.grant.Deadline()) && s.renewing:
			heap.Pop(&r.heap)
			lost = r.lostLocked(s, lost, fmt.Errorf("%w: renewal still unanswered at the lease deadline (%v lease)", ErrLost, s.grant.TTL))
		case !now.Before(s.grant.Deadline()):
			heap.Pop(&r.heap)
			lost = r.lostLocked(s, lost, fmt.Errorf("%w: no renewal acknowledged within the %v lease", ErrLost, s.grant.TTL))
		case s.renewing:
			// An operation in place of the renewal (runAsRenewal) is
			// running as it comes due: keep watching the deadline, and
			// renew as soon as the operation returns.
			s.setAt(s.grant.Deadline())
			s.fellDue = true
			heap.Fix(&r.heap, 0)
		default:
			s.renewing = true
			s.setAt(s.grant.Deadline())
			heap.Fix(&r.heap, 0)
			due = append(due, s)
		}
	}
	r.nextAt = time.Now().Add(time.Hour)
	if len(r.heap) > 0 {
		r.nextAt = r.heap[0].at
	}
	r.timer.Reset(time.Until(r.nextAt))
	return due, lost
}

// lostLocked appends the holds of s, an entry taken off the heap, to lost
// with cause: its hold, or every hold under its lease, which is forgotten.
// r.mu is held.
func (r *renewer) lostLocked(s *schedule, lost []holdLoss, cause error) []holdLoss {
	if s.hold != nil {
		return append(lost, holdLoss{s.hold, cause})
	}
	lg := s.lease
	delete(r.leases, lg.key)
	for _, h := range lg.members {
		h.member = -1
		lost = append(lost, holdLoss{h, cause})
	}
	lg.members = nil
	return lost
}

// renewBatch renews the entries that are due: each lease in one call of
// its own (backends.LeaseSharer), and the holds in one call for a driver
// that can batch, or one call per hold, each on its own goroutine and
// applied as it returns, so that one renewal that hangs holds up no other.
// Holds that ended since collect took them are not renewed.
func (r *renewer) renewBatch(due []*schedule) {
	r.mu.Lock()
	var live []*hold
	var leases []*leaseGroup
	latest := time.Time{}
	for _, s := range due {
		if s.index < 0 { // ended meanwhile: nothing to renew
			s.finish()
			continue
		}
		if s.lease != nil {
			leases = append(leases, s.lease)
			continue
		}
		live = append(live, s.hold)
		latest = later(latest, s.grant.Deadline())
	}
	r.mu.Unlock()
	for _, lg := range leases {
		r.l.bg.Go(func() { r.renewLease(lg) })
	}
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

// renewLease renews one lease with the holds under it, bounded by its
// deadline, and applies the outcome: the new grant serves every hold the
// driver did not report gone; those it did are lost, and all of them if
// the lease is gone.
func (r *renewer) renewLease(lg *leaseGroup) {
	r.mu.Lock()
	hs := append(lg.hs[:0], lg.members...)
	dhs := lg.dhs[:0]
	for _, h := range hs {
		dhs = append(dhs, h.dh)
	}
	lg.hs, lg.dhs = hs, dhs
	have := lg.sched.grant
	r.mu.Unlock()
	ctx, cancel := context.WithDeadline(r.l.ctx, have.Deadline())
	g, gone, err := r.ls.RenewLease(ctx, lg.key, have, dhs)
	cancel()
	if err == nil && len(gone) > len(hs) {
		// A driver that breaks the contract: its answer cannot be trusted.
		err = fmt.Errorf("%w: driver answered for %d holds of a lease of %d", ErrUnavailable, len(gone), len(hs))
	}

	var lost []holdLoss
	failed := 0
	r.mu.Lock()
	s := &lg.sched
	s.finish()
	if s.index < 0 {
		clear(hs)
		clear(dhs)
		r.mu.Unlock()
		return // every hold left, or all were lost at the deadline, meanwhile
	}
	now := time.Now()
	switch {
	case err == nil:
		if g.Expiry().After(s.grant.Expiry()) {
			s.grant = g
		}
		s.failures = 0
		s.setAt(earlier(later(renewal(s.grant, now), now.Add(s.grant.TTL/20)), s.grant.Deadline()))
		for i, gerr := range gone {
			if h := hs[i]; gerr != nil && h.member >= 0 {
				r.leave(h)
				lost = append(lost, holdLoss{h, fmt.Errorf("%w: %w", ErrLost, gerr)})
			}
		}
	case errors.Is(err, ErrNotHeld):
		heap.Remove(&r.heap, s.index)
		lost = r.lostLocked(s, nil, fmt.Errorf("%w: %w", ErrLost, err))
	default:
		s.failures++
		failed = len(lg.members)
		s.setAt(earlier(now.Add(min(s.grant.TTL/10, time.Duration(s.failures)*20*time.Millisecond)), s.grant.Deadline()))
	}
	if s.index >= 0 {
		heap.Fix(&r.heap, s.index)
	}
	ok, failures := len(lg.members), s.failures
	if failed > 0 {
		ok = 0
	}
	// The copies are dropped once read, under r.mu (the next renewal of
	// the lease fills them, and starts under it), so that they keep no
	// ended hold.
	clear(hs)
	clear(dhs)
	r.scheduleLocked()
	r.mu.Unlock()
	r.l.tel.renewed(ok, failed, len(lost))
	if failed > 0 {
		r.l.log.Debug("padlock: lease renewal failed; retrying", "holds", failed, "err", err)
		if failures == 3 {
			r.l.log.Warn("padlock: lease renewals keep failing; its locks are lost at its deadline unless one succeeds", "holds", failed)
		}
	}
	endLost(lost)
}

// apply records renewal results of holds renewed on their own, reschedules
// them, and ends those the server says are gone.
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
		s.finish()
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
			s.setAt(earlier(later(renewal(s.grant, now), now.Add(s.grant.TTL/20)), s.grant.Deadline()))
		case errors.Is(res.Err, ErrNotHeld):
			heap.Remove(&r.heap, s.index)
			lost = append(lost, holdLoss{h, fmt.Errorf("%w: %w", ErrLost, res.Err)})
			continue
		default:
			// Retry soon, but not in a tight loop, and never past the deadline.
			s.failures++
			retry := now.Add(min(s.grant.TTL/10, time.Duration(s.failures)*20*time.Millisecond))
			s.setAt(earlier(retry, s.grant.Deadline()))
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
	endLost(lost)
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

// epoch is the origin of schedule.atMono: a reading of the monotonic
// clock, so the heap's order never follows a change of the wall clock.
var epoch = time.Now()

// setAt sets the entry's next event; its heap position is the caller's
// to fix.
func (s *schedule) setAt(t time.Time) {
	s.at = t
	s.atMono = t.Sub(epoch)
}

// schedHeap orders heap entries (holds and leases) by their next event.
type schedHeap []*schedule

func (q schedHeap) Len() int           { return len(q) }
func (q schedHeap) Less(i, j int) bool { return q[i].atMono < q[j].atMono }
func (q schedHeap) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *schedHeap) Push(x any) {
	s := x.(*schedule)
	s.index = len(*q)
	*q = append(*q, s)
}
func (q *schedHeap) Pop() any {
	old := *q
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	s.index = -1
	return s
}
