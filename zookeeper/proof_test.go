package zookeeper

import (
	"testing"
	"time"
)

// The certified time moves only to a proof whose answer came at least a
// tick before a later proof was sent; never backwards; and never on an
// answer that came after the session's certified lease ran out.
func TestProofsCertify(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	const ttl, lag = 2 * time.Second, 100 * time.Millisecond
	p := newProofs(at(0), ttl, lag)
	check := func(want int) {
		t.Helper()
		if got := p.start(); !got.Equal(at(want)) {
			t.Fatalf("certified at %v, want %dms", got.Sub(t0), want)
		}
	}
	proved := func(sent, answered int) {
		t.Helper()
		if !p.proved(at(sent), at(answered)) {
			t.Fatalf("the proof sent at %dms, answered at %dms, refused", sent, answered)
		}
	}
	check(0) // the session's creation
	proved(500, 510)
	check(0) // nothing certifies the first proof yet
	proved(550, 560)
	check(0) // sent 40ms after the first one's answer: less than a tick
	// Sent 90ms after the first one's answer, a tick after its send: its
	// follower may have seen the first proof just before answering it, and
	// had no ping from the leader since (a client that stalled after
	// sending it), so the leader may not have recorded it.
	proved(600, 700)
	check(0)
	proved(620, 630) // a tick after the first one's answer
	check(500)
	proved(1000, 1010)
	check(620) // the latest proof answered at least a tick before
	if want := at(620).Add(ttl - lag - ttl/20); !p.leaseEnd().Equal(want) {
		t.Fatalf("lease ends at %v, want %v", p.leaseEnd().Sub(t0), want.Sub(t0))
	}
	// The leader was paused: the next answer comes after the lease.
	if p.proved(at(2500), at(2510)) {
		t.Fatal("an answer after the certified lease ran out was taken as proof")
	}
	check(620)
}

// A proof answered long after it was sent (the leader paused meanwhile)
// still only certifies proofs answered a tick before it was sent, never
// itself, and only a proof sent a tick after its own answer certifies it.
func TestProofsSlowAnswer(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	p := newProofs(at(0), 2*time.Second, 100*time.Millisecond)
	p.proved(at(100), at(110))
	p.proved(at(300), at(1500)) // certifies 100, not 300
	if got := p.start(); !got.Equal(at(100)) {
		t.Fatalf("certified at %v, want 100ms", got.Sub(t0))
	}
	p.proved(at(1550), at(1560)) // within a tick of 300's answer
	if got := p.start(); !got.Equal(at(100)) {
		t.Fatalf("certified at %v, want 100ms", got.Sub(t0))
	}
	if next := p.next(at(300), at(1500)); !next.Equal(at(1600)) {
		t.Fatalf("next proof after a slow one at %v, want a tick after its answer", next.Sub(t0))
	}
}

// With ZooKeeper's defaults (a 2s tick, so a lag of 2s) and padlock's 10s
// lease, one failed proof (the connection closed under it: a server's
// restart, an election) must not cost the session: the prover tries
// again soon, well before the certified lease ends, and that proof, once
// answered, moves the certified time on. Trying again a period later, as
// after an answer, came at the lease's end: the session was given up.
func TestProofRetriedSoonAfterAFailure(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	const ttl, lag = 10 * time.Second, 2 * time.Second
	p := newProofs(at(0), ttl, lag)
	// Steady proofs a period apart, each answered at once.
	sent := at(0)
	for range 4 {
		if !p.proved(sent, sent.Add(5*time.Millisecond)) {
			t.Fatalf("the proof sent at %v refused", sent.Sub(t0))
		}
		sent = p.next(sent, sent.Add(5*time.Millisecond))
	}
	// The next one fails at once; so does the first retry.
	end := p.leaseEnd()
	retry := p.retryAfter(sent, 1)
	if period := sent.Add(p.period()); !period.Before(end) {
		t.Logf("a period after the failure (%v) is past the lease's end (%v): the old rule lost the session", period.Sub(t0), end.Sub(t0))
	}
	retry = p.retryAfter(retry, 2)
	if left := end.Sub(retry); left < time.Second {
		t.Fatalf("after two failed proofs the next goes at %v, %v before the lease ends at %v; want a second at least", retry.Sub(t0), left, end.Sub(t0))
	}
	before := p.start()
	if !p.proved(retry, retry.Add(5*time.Millisecond)) {
		t.Fatal("the retried proof, answered before the lease's end, refused")
	}
	if !p.start().After(before) {
		t.Fatalf("the retried proof did not move the certified time on from %v", before.Sub(t0))
	}
	// Failures in a row back off to a period, never longer.
	for f := 1; f < 20; f++ {
		if d := p.retryAfter(at(0), f).Sub(at(0)); d > p.period() || d <= 0 {
			t.Fatalf("failure %d: the next proof %v later, want (0, %v]", f, d, p.period())
		}
	}
}
