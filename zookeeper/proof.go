package zookeeper

import (
	"context"
	"sync"
	"time"

	"github.com/padlock-go/padlock/backends"
)

// Why a follower's answer proves too little
//
// ZooKeeper's leader alone expires sessions, by its own record of when it
// last heard of each. A client talks to one server, usually a follower:
// the follower answers the client's pings and reads by itself, and relays
// the session's activity to the leader only in its reply to the leader's
// next ping, which the leader sends every half tick. So an answer from a
// follower says nothing about the leader's record. A leader paused for two
// session timeouts, with no election, expires a live client's session the
// moment it resumes, on a record as old as the pause, and grants the next
// waiter; the holder's follower answered everything meanwhile (fault
// suite, scenario 14 on a three-server ensemble).
//
// So a grant starts at the latest moment the leader has surely recorded,
// its certified time C: the leader's expiry for the session is then at
// least C plus the session timeout, on the leader's clock. C moves in two
// ways:
//
//   - The session's creation: the leader records it directly.
//   - A leader-proven request A (a sync, which the leader itself answers)
//     followed by another, B, sent at least one tick (lag) after it: the
//     leader, running when it answered B, has pinged A's follower since the
//     follower saw A, so it has recorded A. B then certifies A.
//
// A leader paused between A and B's answer breaks the second rule: B's
// answer can come from a leader that has just resumed and is about to
// expire the session on a stale record. That is safe as long as B is
// answered before the session's certified lease ends (C + timeout - lag):
// the resumed leader's first ping round, within half a tick, refreshes its
// record before its stale expiry, since the pause ended at least lag
// before it. An answer after that proves nothing, so a session whose lease
// ran out is given up: new acquisitions open a new session, and its holds
// close their Done at their own deadlines (C + timeout - margin). Its
// connection closes at C + timeout, after them, since closing it makes the
// server delete its nodes and hand its locks on.
//
// The prover, one per session, sends a sync every max(timeout/4, lag) so
// that C keeps up; a hold's renewal reads C. The argument assumes that the
// leader does not pause twice within one session timeout, and that lag,
// half ZooKeeper's minimum session timeout, is at least one tick (the
// minimum is two ticks unless an operator lowered it).

// proofs is a session's record of leader-proven requests and its
// certified time.
type proofs struct {
	lag time.Duration // at least one tick: the leader pings followers every half tick
	ttl time.Duration // the session timeout

	mu        sync.Mutex
	certified time.Time   // C: the leader's expiry is at least C + ttl
	sent      []time.Time // send times of proven requests not yet certified, oldest first
}

func newProofs(created time.Time, ttl, lag time.Duration) *proofs {
	return &proofs{lag: lag, ttl: ttl, certified: created}
}

// period is how often the prover proves the leader alive: often enough
// that C trails the present by at most two periods (half the timeout), and
// never less than lag, so that each proof certifies the one before it.
func (p *proofs) period() time.Duration { return max(p.ttl/4, p.lag) }

// start is the certified time: the start of every grant on the session.
func (p *proofs) start() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.certified
}

// grant is the lease of every hold on the session: the leader keeps the
// session, and so its nodes, at least a timeout past the certified time.
func (s *session) grant() backends.Grant {
	return backends.Grant{Sent: s.proofs.start(), TTL: s.ttl}
}

// expiry is the earliest moment at which the leader may expire the
// session: a timeout past the certified time.
func (p *proofs) expiry() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.certified.Add(p.ttl)
}

// leaseEnd is when the session's certified lease runs out: an answer that
// arrives later proves nothing.
func (p *proofs) leaseEnd() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.certified.Add(p.ttl - p.lag)
}

// proved records a leader-proven request sent at sent and answered at
// answered, and advances the certified time to the latest earlier proof
// sent at least lag before it. It reports false if the answer came after
// the session's lease ran out: the session can no longer be trusted.
func (p *proofs) proved(sent, answered time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !answered.Before(p.certified.Add(p.ttl - p.lag)) {
		return false
	}
	keep := 0
	for i, a := range p.sent {
		if a.Add(p.lag).After(sent) {
			break
		}
		if a.After(p.certified) {
			p.certified = a
		}
		keep = i + 1
	}
	p.sent = append(p.sent[keep:], sent)
	return true
}

// startProver starts the session's prover, before the session is used for
// holds. (Open's first session, which only makes the lock root, has none.)
func (s *session) startProver() {
	s.proverDone = make(chan struct{})
	go s.prove()
}

// prove runs the session's prover until the session ends: a sync every
// period, each recorded as a proof. It kills the session when its lease
// runs out without a proof that came in time (a paused leader, or no
// server that answers).
func (s *session) prove() {
	defer close(s.proverDone)
	next := time.NewTimer(s.proofs.period())
	defer next.Stop()
	for {
		end := s.proofs.leaseEnd()
		if !time.Now().Before(end) {
			s.lapse("no proof within its timeout that the leader recorded it")
			return
		}
		lease := time.NewTimer(time.Until(end))
		select {
		case <-next.C:
			lease.Stop()
		case <-lease.C:
			continue // ended: said at the top
		case <-s.expired:
			lease.Stop()
			return
		}
		sent := time.Now()
		next.Reset(s.proofs.period())
		ctx, cancel := context.WithDeadline(context.Background(), s.proofs.leaseEnd())
		_, err := call(ctx, s, "prove leader", func() (string, error) { return s.conn.Sync(s.d.root) })
		cancel()
		if err == nil && !s.proofs.proved(sent, time.Now()) {
			s.lapse("the leader answered only after its certified lease ran out")
			return
		}
	}
}
