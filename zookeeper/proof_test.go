package zookeeper

import (
	"testing"
	"time"
)

// The certified time moves only to a proof that a later proof, sent at
// least a tick after it, confirmed; never backwards; and never on an
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
	check(0) // the session's creation
	if !p.proved(at(500), at(510)) {
		t.Fatal("a proof in time refused")
	}
	check(0) // nothing certifies the first proof yet
	if !p.proved(at(550), at(560)) {
		t.Fatal("a proof in time refused")
	}
	check(0) // 50ms after the first: less than a tick, so it certifies nothing
	if !p.proved(at(600), at(700)) {
		t.Fatal("a proof in time refused")
	}
	check(500) // a tick after the first proof: the leader has recorded it
	if !p.proved(at(1000), at(1010)) {
		t.Fatal("a proof in time refused")
	}
	check(600) // the latest proof at least a tick older
	if p.leaseEnd() != at(600).Add(ttl-lag) {
		t.Fatalf("lease ends at %v", p.leaseEnd().Sub(t0))
	}
	// The leader was paused: the next answer comes after the lease.
	if p.proved(at(2000), at(2500)) {
		t.Fatal("an answer after the certified lease ran out was taken as proof")
	}
	check(600)
}

// A proof answered long after it was sent (the leader paused meanwhile)
// still only certifies proofs sent a tick before it, never itself.
func TestProofsSlowAnswer(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	p := newProofs(at(0), 2*time.Second, 100*time.Millisecond)
	p.proved(at(100), at(110))
	p.proved(at(300), at(1800)) // certifies 100, not 300
	if got := p.start(); !got.Equal(at(100)) {
		t.Fatalf("certified at %v, want 100ms", got.Sub(t0))
	}
}
