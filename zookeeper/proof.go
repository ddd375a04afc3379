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
// the session's certified time C: the leader's expiry for the session is
// then at least C plus the session timeout, on the leader's clock (its
// record of a touch is its own now plus the timeout, rounded up to a
// tick). C moves in two ways:
//
//   - The session's creation: the leader records it directly.
//   - A leader-proven request A (a sync, which the leader itself answers)
//     and a later one, B, sent at least one tick (lag) after A's answer
//     came back. A's follower had seen A by then; a running leader pings
//     it within half a tick, and the follower's reply, carrying A's touch,
//     goes to the leader on the same ordered stream as the request B it
//     forwards later; so the leader, answering B, recorded A first. (A
//     client that reconnected to another server meanwhile had that server
//     revalidate the session with the leader, which records it too.) B's
//     answer certifies A's send time.
//
// A leader paused inside that window breaks the second rule: B's answer
// then comes from a leader that has just resumed and may be about to
// expire the session on a stale record. That is safe as long as B is
// answered before the session's certified lease ends (C + timeout - a tick
// - a twentieth of the timeout for drift): the pause then ended a tick
// before the stale expiry, and the resumed leader's first ping round, within
// half a tick, refreshes its record first. An answer after that proves
// nothing, so a session whose lease ran out is given up: its holds' Done
// closes at once (their Lost ends), new acquisitions open a new session,
// and its connection closes only at C + timeout, since closing it makes the
// server delete its nodes and hand its locks on.
//
// The prover, one per session, sends a sync at once and then every
// max(timeout/4, a tick after the last answer), so that C keeps up, and
// again soon after one that failed (retryAfter); a hold's renewal reads C. The argument assumes that a resumed leader
// completes a ping round within a tick (it does not pause again at once,
// and its ping loop keeps its half-tick pace while it serves requests),
// that lag, half the server's minimum session timeout, is at least one tick
// (the minimum is two ticks unless an operator lowered it), and that clients
// reach the leader through followers, not observers behind an observer
// master (two relays).

// proofs is a session's record of leader-proven requests and its
// certified time.
type proofs struct {
	lag time.Duration // at least one tick: the leader pings followers every half tick
	ttl time.Duration // the session timeout

	mu        sync.Mutex
	certified time.Time // C: the leader's expiry is at least C + ttl
	pending   []proof   // proofs not yet certified, oldest first
}

// proof is one leader-proven request: when it was sent, and when its
// answer came back (by when its follower had seen it).
type proof struct{ sent, answered time.Time }

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
// arrives later proves nothing. It keeps a tick from the expiry (the
// resumed leader's first ping round must come before its stale expiry),
// and a twentieth of the timeout for the server's clock running fast
// (backends.SafetyMargin allows the same drift).
func (p *proofs) leaseEnd() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leaseEndLocked()
}

func (p *proofs) leaseEndLocked() time.Time {
	return p.certified.Add(p.ttl - p.lag - p.ttl/20)
}

// proved records a leader-proven request sent at sent and answered at
// answered, and advances the certified time to the latest earlier proof
// answered at least lag before this one was sent: its follower had seen
// it by its answer, so the leader, running when it answered this one, has
// pinged that follower since, and the follower's reply, which carries the
// session's activity, came before this request on the same stream. It
// reports false if the answer came after the session's lease ran out: the
// session can no longer be trusted.
func (p *proofs) proved(sent, answered time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !answered.Before(p.leaseEndLocked()) {
		return false
	}
	keep := 0
	for i, a := range p.pending {
		if a.answered.Add(p.lag).After(sent) {
			break
		}
		if a.sent.After(p.certified) {
			p.certified = a.sent
		}
		keep = i + 1
	}
	p.pending = append(p.pending[keep:], proof{sent, answered})
	return true
}

// next is when the prover sends its next proof, after one sent at sent and
// answered at answered: a period later, and a tick after the answer, so
// that it certifies this one.
func (p *proofs) next(sent, answered time.Time) time.Time {
	return later(sent.Add(p.period()), answered.Add(p.lag))
}

// retryAfter is when the prover sends again after the proof it sent at
// sent failed, its failures-th failure in a row (from 1): soon, backing
// off to a period. A failure is most often the connection closing under
// the request (a server restarting, an election), and the client is back
// on its session within moments: waiting a whole period, as after an
// answer, put the next proof at or after the lease's end with ZooKeeper's
// defaults (a 2s tick, so a lag of 2s, and padlock's 10s lease), and a
// session that had lived through a moment's disconnection was given up,
// every hold on it lost (TestProofRetriedSoonAfterAFailure).
func (p *proofs) retryAfter(sent time.Time, failures int) time.Time {
	return sent.Add(min(proofRetry.NextBackoff(failures-1), p.period()))
}

// proofRetry paces the prover's tries after failed proofs.
var proofRetry = backends.ExponentialBackoff(20*time.Millisecond, time.Second)

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// startProver starts the session's prover, before the session is used for
// holds. (Open's first session, which only makes the lock root, has none.)
func (s *session) startProver() {
	s.proverDone = make(chan struct{})
	go s.prove()
}

// prove runs the session's prover until the session ends: a sync at once,
// then one every period, each recorded as a proof. It gives the session up
// when its lease runs out without a proof that came in time (a paused
// leader, or no server that answers).
func (s *session) prove() {
	defer close(s.proverDone)
	next := time.NewTimer(0)
	defer next.Stop()
	failures := 0 // failed proofs in a row
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
		ctx, cancel := context.WithDeadline(context.Background(), end)
		_, err := call(ctx, s, "prove leader", func() (string, error) { return s.conn.Sync(s.d.root) })
		cancel()
		answered := time.Now()
		switch {
		case err != nil:
			failures++
			next.Reset(time.Until(s.proofs.retryAfter(sent, failures)))
		case s.conn.SessionID() != s.id:
			// go-zookeeper made a new session on the connection: the
			// answer is about that one.
			s.kill("the server expired it")
			return
		case !s.proofs.proved(sent, answered):
			s.lapse("the leader answered only after its certified lease ran out")
			return
		default:
			failures = 0
			next.Reset(time.Until(s.proofs.next(sent, answered)))
		}
	}
}
