package zookeeper_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
)

// With digest auth, the nodes padlock creates carry an ACL that lets only
// that user change them: another client cannot delete a holder's node.
func TestDigestACL(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := newHarness(t, single, "digest=alice:s3cret")
	t.Cleanup(func() { h.Close() })
	l := h.open(t, ctx)
	lk, err := l.Lock(ctx, "guarded")
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := h.State(ctx)
	if err != nil || len(nodes) != 1 {
		t.Fatalf("state %q, %v; want one node", nodes, err)
	}
	// The inspector has no credentials.
	if err := h.inspect.Delete(nodes[0], -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("a client without the digest deleted the holder's node: %v, want ErrNoAuth", err)
	}
	if _, err := h.inspect.Set(nodes[0], []byte("x"), -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("a client without the digest wrote the holder's node: %v, want ErrNoAuth", err)
	}
	if !isOpen(lk.Done()) {
		t.Fatalf("hold lost: %v", lk.Err())
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The password never shows in an error.
	if _, err := padlock.Open(ctx, "zk://127.0.0.1:1/p?digest=alice:s3cret"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Open = %v: must fail without showing the password", err)
	}
}

// An uncontended Lock+Unlock costs three requests, as the floor's (create,
// which tells the token, in a multi with a setData of the parent; list;
// delete), counted by the server itself; docs/zookeeper.md quotes it.
// Session heartbeats and proofs in the window add a few, which many cycles
// make a small share of each.
func TestRequestsPerCycle(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := newHarness(t, single, "")
	t.Cleanup(func() { h.Close() })
	l := h.open(t, ctx)
	lk, err := l.Lock(ctx, "warm") // the session and the parent exist from here on
	if err != nil {
		t.Fatal(err)
	}
	lk.Unlock(ctx)
	const cycles = 400
	before := packetsReceived(t, ctx)
	for range cycles {
		conformance.Cycle(ctx, t, l, "warm")
	}
	// The inspector's and mntr's own packets are a handful; heartbeats
	// at most a few per second.
	per := float64(packetsReceived(t, ctx)-before) / cycles
	t.Logf("%.2f requests per uncontended Lock+Unlock", per)
	if per > 3.5 {
		t.Errorf("%.2f requests per uncontended Lock+Unlock, want 3", per)
	}
}

// A TTL below the shortest session padlock asks for is raised to it, and
// every acquisition with that TTL shares the one raised session: five
// cycles open one connection, not five.
func TestShortTTLSharesSession(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := newHarness(t, single, "")
	t.Cleanup(func() { h.Close() })
	l, err := padlock.Open(ctx, "zk://"+single.Nodes()[0].Addr+h.root, padlock.WithTTL(padlock.MinTTL))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if min := l.Capabilities().MinTTL; min <= padlock.MinTTL {
		t.Fatalf("Capabilities().MinTTL = %v, want above padlock.MinTTL (four ticks)", min)
	}
	before := aliveConnections(t, ctx)
	for range 5 {
		conformance.Cycle(ctx, t, l, "short")
	}
	if after := aliveConnections(t, ctx); after > before+1 {
		t.Fatalf("%d connections before five cycles, %d after: a session per acquisition", before, after)
	}
}

// The create tells the token through a setData of the name's node in the
// same multi. Where that node's ACL lets a client create under it but not
// write it (made by another tool), the multi is refused as a whole: the
// driver creates alone and reads the token, which is still the node's
// czxid (what Holders reports) and still rises.
func TestTokenWhereNameNodeRefusesWrite(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := newHarness(t, single, "")
	t.Cleanup(func() { h.Close() })
	l := h.open(t, ctx)
	conformance.Cycle(ctx, t, l, "warm") // the root exists from here on
	parent := h.root + "/k-nowrite"
	if _, err := h.inspect.Create(parent, nil, 0, zk.WorldACL(zk.PermCreate|zk.PermRead|zk.PermDelete)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.inspect.Delete(parent, -1) })
	var last uint64
	for i := range 3 {
		lk, err := l.Lock(ctx, "nowrite")
		if err != nil {
			t.Fatalf("Lock %d under a name node that refuses writes: %v", i, err)
		}
		hs, err := l.Holders(ctx, "nowrite")
		if err != nil || len(hs) != 1 || hs[0].Token != lk.Token() {
			t.Errorf("Holders = %+v, %v; want one, token %d", hs, err, lk.Token())
		}
		if lk.Token() <= last {
			t.Errorf("token %d after %d", lk.Token(), last)
		}
		last = lk.Token()
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
