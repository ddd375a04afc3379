package zookeeper_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/padlocktest"
)

func TestOpenErrors(t *testing.T) {
	conformance.CheckOpenErrors(t, []conformance.OpenCase{
		{URL: "zk://127.0.0.1:1/p?bogus=1", Want: padlock.ErrInvalidOption, Msg: `"bogus" for zk:// (known: ttl, wait, digest, dial_timeout, request_timeout, password_file, password_env, ca, cert, key, server_name)`},
		{URL: "zk://127.0.0.1:1/p?digest=nocolon", Want: padlock.ErrInvalidOption, Msg: "user:password, or user with password_file="},
		{URL: "zk://127.0.0.1:1/p?digest=:s3cret", Want: padlock.ErrInvalidOption, Msg: "needs a user"},
		{URL: "zk://127.0.0.1:1/p?digest=alice:s3cret&password_env=PW", Want: padlock.ErrInvalidOption, Msg: "at once"},
		{URL: "zk://127.0.0.1:1/p?password_file=/tmp/pw", Want: padlock.ErrInvalidOption, Msg: "digest=user, which is missing"},
		{URL: "zk://127.0.0.1:1/p?digest=alice&password_file=/nonexistent/pw", Want: padlock.ErrInvalidOption, Msg: "password_file=/nonexistent/pw"},
		{URL: "zk://127.0.0.1:1/p?dial_timeout=soon", Want: padlock.ErrInvalidOption, Msg: "dial_timeout"},
		{URL: "zk:///p", Want: padlock.ErrInvalidURL, Msg: "host:port"},
		{URL: "zk://127.0.0.1:1,127.0.0.1:1/p", Want: padlock.ErrInvalidURL, Msg: "appears twice"},
		{URL: "zk://127.0.0.1:1/a/../b", Want: padlock.ErrInvalidURL, Msg: "clean absolute path"},
		{URL: "zk://127.0.0.1:1/p", Want: padlock.ErrUnavailable, Msg: "connection refused"},
		{URL: "zks://127.0.0.1:1/p", Want: padlock.ErrUnavailable, Msg: "connection refused"},
		{URL: "zks://127.0.0.1:1/p?cert=/tmp/c.pem", Want: padlock.ErrInvalidOption, Msg: "cert= and key= go together"},
		{URL: "zk://127.0.0.1:1/p?ca=/nonexistent/ca.pem", Want: padlock.ErrInvalidOption, Msg: "ca=/nonexistent/ca.pem"},
		{URL: "zks://127.0.0.1:1/a/../b", Want: padlock.ErrInvalidURL, Msg: "zks:// lock root"},
	})
}

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

// Deleting and making again the lock's parent does not make tokens go
// backwards: the token is the node's czxid, not its sequence number.
func TestTokensSurviveParentRecreated(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := newHarness(t, single, "")
	t.Cleanup(func() { h.Close() })
	l := h.open(t, ctx)
	var last uint64
	for round := range 3 {
		lk, err := l.Lock(ctx, "recreated")
		if err != nil {
			t.Fatal(err)
		}
		nodes, _ := h.State(ctx)
		if round > 0 && lk.Token() <= last {
			t.Errorf("round %d: token %d after %d", round, lk.Token(), last)
		}
		// The sequence restarts with the parent: proof that it would not do.
		if round > 0 && len(nodes) == 1 && !strings.HasSuffix(nodes[0], "0000000000") {
			t.Errorf("round %d: the parent was not made again (node %s)", round, nodes[0])
		}
		last = lk.Token()
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		parent := nodes[0][:strings.LastIndex(nodes[0], "/")]
		if err := h.inspect.Delete(parent, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Fatalf("deleting the parent %s: %v", parent, err)
		}
	}
	if last == 0 {
		t.Fatal("no token seen")
	}
}

func isOpen(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

// packetsReceived reads the server's count of client packets (mntr).
func packetsReceived(t *testing.T, ctx context.Context) int {
	t.Helper()
	out, err := padlocktest.FourLetter(ctx, single.Nodes()[0].Addr, "mntr")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "zk_packets_received\t"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no zk_packets_received in mntr: %q", out)
	return 0
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
		lk, err := l.Lock(ctx, "warm")
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The inspector's and mntr's own packets are a handful; heartbeats
	// at most a few per second.
	per := float64(packetsReceived(t, ctx)-before) / cycles
	t.Logf("%.2f requests per uncontended Lock+Unlock", per)
	if per > 5 {
		t.Errorf("%.2f requests per uncontended Lock+Unlock, want 4", per)
	}
}

// A client whose digest the lock root's ACL does not admit fails fast
// with ErrAccessDenied naming the cause, on a name in use and on a new
// one, and its password shows nowhere.
func TestDigestWrongUser(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The owner's password comes from the environment, the intruder's
	// from the URL.
	t.Setenv("PADLOCK_TEST_ZK_PW", "s3cret")
	h := newHarness(t, single, "digest=alice&password_env=PADLOCK_TEST_ZK_PW")
	t.Cleanup(func() { h.Close() })
	owner := h.open(t, ctx)
	lk, err := owner.Lock(ctx, "private")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(ctx)
	h.query = "digest=mallory:guess-9q"
	intruder := h.open(t, ctx)
	for _, name := range []string{"private", "fresh"} {
		start := time.Now()
		_, err := intruder.Lock(ctx, name)
		if !errors.Is(err, padlock.ErrAccessDenied) || !strings.Contains(err.Error(), "not authenticated") {
			t.Errorf("Lock(%q) by another digest user = %v, want ErrAccessDenied naming the refusal", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "guess-9q") {
			t.Errorf("the password shows in %v", err)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("Lock(%q) took %v to be refused", name, d)
		}
	}
	if !isOpen(lk.Done()) {
		t.Fatalf("the owner's hold was lost: %v", lk.Err())
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
		lk, err := l.Lock(ctx, "short")
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if after := aliveConnections(t, ctx); after > before+1 {
		t.Fatalf("%d connections before five cycles, %d after: a session per acquisition", before, after)
	}
}

// aliveConnections reads the standalone server's count of client
// connections (mntr).
func aliveConnections(t *testing.T, ctx context.Context) int {
	t.Helper()
	out, err := padlocktest.FourLetter(ctx, single.Nodes()[0].Addr, "mntr")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "zk_num_alive_connections\t"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no zk_num_alive_connections in mntr: %q", out)
	return 0
}
