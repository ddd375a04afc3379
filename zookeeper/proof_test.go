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
