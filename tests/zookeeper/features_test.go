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

// An uncontended Lock+Unlock costs four requests (create, list, read the
// token, delete), counted by the server itself; docs/zookeeper.md quotes
// it. Session heartbeats in the window may add a few.
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
	const cycles = 100
	before := packetsReceived(t, ctx)
	for range cycles {
		conformance.Cycle(ctx, t, l, "warm")
	}
	// The inspector's and mntr's own packets are a handful; heartbeats
	// at most a few per second.
	per := float64(packetsReceived(t, ctx)-before) / cycles
	t.Logf("%.2f requests per uncontended Lock+Unlock", per)
	if per > 5 {
		t.Errorf("%.2f requests per uncontended Lock+Unlock, want 4", per)
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
