package zookeeper_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/padlocktest"
)

// What the conformance suite cannot see of elections on ZooKeeper: where
// the value is kept (the candidate's own queue node, read here with the
// harness's own connection), what a Proclaim changes on the server and
// what it leaves, and the watches behind Observe.

// only returns the one queue node under the harness's root, failing if
// there is not exactly one.
func only(t *testing.T, ctx context.Context, h *harness) string {
	t.Helper()
	nodes, err := h.State(ctx)
	if err != nil || len(nodes) != 1 {
		t.Fatalf("queue nodes %q, %v; want exactly one", nodes, err)
	}
	return nodes[0]
}

// nodeJSON reads a queue node's data and stat on the server.
func nodeJSON(t *testing.T, h *harness, path string) (map[string]any, *zk.Stat) {
	t.Helper()
	data, st, err := h.inspect.Get(path)
	if err != nil {
		t.Fatalf("get %s: %v", path, err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s holds %q: %v", path, data, err)
	}
	return m, st
}

// A candidacy's value is in its own queue node, with the claim: the node
// the create made holds it, and Holders reports it. A mutex's node holds
// what it always did (no elect or value), and is no leader.
func TestElectionValueInNode(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h := newHarness(t, single, "")
	t.Cleanup(func() { h.Close() })
	l := h.open(t, ctx)

	ld, err := l.Election("el").Campaign(ctx, "10.0.0.7:8080")
	if err != nil {
		t.Fatal(err)
	}
	node := only(t, ctx, h)
	m, st := nodeJSON(t, h, node)
	if m["elect"] != true || m["value"] != "10.0.0.7:8080" || m["name"] != "el" {
		t.Errorf("candidacy's node %s holds %v; want elect, its value and its name", node, m)
	}
	if st.Version != 0 || uint64(st.Czxid) != ld.Token() {
		t.Errorf("candidacy's node: version %d czxid %d; want the create's (0, the token %d)", st.Version, st.Czxid, ld.Token())
	}
	hs, err := l.Holders(ctx, "el")
	if err != nil || len(hs) != 1 || !hs[0].Elect || hs[0].Value != "10.0.0.7:8080" || hs[0].Token != ld.Token() {
		t.Errorf("Holders = %+v, %v; want the candidacy with its value and token", hs, err)
	}
	if err := ld.Resign(ctx); err != nil {
		t.Fatal(err)
	}

	// A plain lock: the node's data has exactly the keys it had before
	// elections, and the name has no leader.
	lk, err := l.Lock(ctx, "el")
	if err != nil {
		t.Fatal(err)
	}
	m, _ = nodeJSON(t, h, only(t, ctx, h))
	for k := range m {
		if !slices.Contains([]string{"name", "host", "pid", "owner", "at"}, k) {
			t.Errorf("a mutex's node has %q: %v", k, m)
		}
	}
	if got, err := l.Election("el").Leader(ctx); !errors.Is(err, padlock.ErrNoLeader) {
		t.Errorf("Leader of a name a plain Lock holds = %+v, %v; want ErrNoLeader", got, err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// A value that is not UTF-8 comes back byte for byte, as does one
	// proclaimed.
	for _, v := range []string{"\xff\x00a\xfe", "é\x80"} {
		ld, err := l.Election("raw").Campaign(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := l.Election("raw").Leader(ctx); err != nil || got.Value != v {
			t.Errorf("Leader = %q, %v; want %q", got.Value, err, v)
		}
		if err := ld.Proclaim(ctx, v+"\xff"); err != nil {
			t.Fatal(err)
		}
		if got, err := l.Election("raw").Leader(ctx); err != nil || got.Value != v+"\xff" {
			t.Errorf("Leader after Proclaim = %q, %v; want %q", got.Value, err, v+"\xff")
		}
		if err := ld.Resign(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A Proclaim rewrites the leader's own node and nothing else: the same
// node (czxid), of the same session (its ephemeral owner, the lease), one
// data version on. The lease keeps being renewed after it (no one else is
// elected for two session timeouts), and the node's deletion still reaches
// the leader's Done: the Proclaim's change fired the watch that reports
// it, which is set again.
func TestElectionProclaimKeepsSession(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h := newHarness(t, single, "")
	t.Cleanup(func() { h.Close() })
	a, b, op := h.open(t, ctx), h.open(t, ctx), h.open(t, ctx)

	ld, err := a.Election("keep").Campaign(ctx, "v1")
	if err != nil {
		t.Fatal(err)
	}
	node := only(t, ctx, h)
	_, before := nodeJSON(t, h, node)
	for i, v := range []string{"v2", "v3"} {
		if err := ld.Proclaim(ctx, v); err != nil {
			t.Fatal(err)
		}
		m, after := nodeJSON(t, h, node)
		if m["value"] != v || after.Version != before.Version+int32(i)+1 {
			t.Errorf("after Proclaim(%q) the node holds %v at version %d; want the value at version %d", v, m, after.Version, before.Version+int32(i)+1)
		}
		if after.EphemeralOwner != before.EphemeralOwner || after.Czxid != before.Czxid {
			t.Errorf("Proclaim changed the node's session or creation: owner %#x→%#x, czxid %d→%d",
				before.EphemeralOwner, after.EphemeralOwner, before.Czxid, after.Czxid)
		}
	}
	if got, err := b.Election("keep").Leader(ctx); err != nil || got != (padlock.Leader{Value: "v3", Token: ld.Token()}) {
		t.Errorf("Leader = %+v, %v; want v3 with the term's token %d", got, err, ld.Token())
	}
	// Renewal goes on: a candidate waiting two session timeouts is not
	// elected, and the term stands.
	if other, err := b.Election("keep").Campaign(ctx, "b", padlock.WithWait(2*h.TTL())); !errors.Is(err, padlock.ErrTimeout) {
		if other != nil {
			other.Resign(ctx)
		}
		t.Fatalf("Campaign while the proclaimed leader leads = %v, want ErrTimeout", err)
	}
	if !isOpen(ld.Done()) {
		t.Fatalf("the term ended after a Proclaim: %v", ld.Err())
	}
	// Its node deleted by an operator, the leader learns it.
	if _, err := op.ForceUnlock(ctx, "keep"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ld.Done():
	case <-time.After(h.TTL() + 30*time.Second):
		t.Fatal("the leader's Done is still open after its node was deleted")
	}
	if !errors.Is(ld.Err(), padlock.ErrLost) {
		t.Errorf("Err = %v, want ErrLost", ld.Err())
	}
}

// A deposed leader's Proclaim changes nothing on the server: not the
// successor's value, and no node of its own comes back. The leader is
// deposed silently: another client changes its node's data and deletes it
// in one transaction, so that the change, not the deletion, fires the
// leader's watch, and until its next renewal looks again the leader does
// not know. The Proclaim then reaches the server, which refuses it (the
// node is gone). A renewal that looked first makes padlock refuse it
// before the server is asked, which is also right but tests less: the
// test tries again until the server was asked, a few times at most.
func TestElectionDeposedProclaim(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h := newHarness(t, single, "")
	t.Cleanup(func() { h.Close() })
	a, b := h.open(t, ctx), h.open(t, ctx)
	const attempts = 10
	for i := range attempts {
		old, err := a.Election("dep").Campaign(ctx, "old")
		if err != nil {
			t.Fatal(err)
		}
		oldNode := only(t, ctx, h)
		type campaign struct {
			ld  *padlock.Leadership
			err error
		}
		res := make(chan campaign, 1)
		go func() {
			ld, err := b.Election("dep").Campaign(ctx, "new")
			res <- campaign{ld, err}
		}()
		padlocktest.WaitFor(t, "the second candidate queued", time.Minute, func() bool {
			nodes, err := h.State(ctx)
			return err == nil && len(nodes) == 2
		})
		data, _, err := h.inspect.Get(oldNode)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.inspect.Multi(&zk.SetDataRequest{Path: oldNode, Data: data, Version: -1},
			&zk.DeleteRequest{Path: oldNode, Version: -1}); err != nil {
			t.Fatal(err)
		}
		r := <-res
		if r.err != nil {
			t.Fatal(r.err)
		}
		err = old.Proclaim(ctx, "stale")
		if !errors.Is(err, padlock.ErrNotHeld) {
			t.Fatalf("the deposed leader's Proclaim = %v, want ErrNotHeld", err)
		}
		newNode := only(t, ctx, h)
		if m, _ := nodeJSON(t, h, newNode); m["value"] != "new" {
			t.Fatalf("the successor's node holds %v after the deposed leader's Proclaim; want its value \"new\"", m)
		}
		if got, err := a.Election("dep").Leader(ctx); err != nil || got != (padlock.Leader{Value: "new", Token: r.ld.Token()}) {
			t.Fatalf("Leader = %+v, %v; want the successor's", got, err)
		}
		// The server's refusal also ends the term.
		select {
		case <-old.Done():
		case <-time.After(h.TTL() + 30*time.Second):
			t.Fatal("the deposed leader's Done is still open")
		}
		if err := r.ld.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if asked := strings.Contains(err.Error(), "zookeeper node"); asked {
			t.Logf("attempt %d: the server refused the Proclaim: %v", i+1, err)
			return
		}
		t.Logf("attempt %d: padlock refused the Proclaim first: %v", i+1, err)
	}
	t.Fatalf("in %d attempts the deposed leader's renewal always saw the deletion before its Proclaim reached the server", attempts)
}

// Observe is pushed by the driver's watches: with an observer whose poll
// is an hour apart, it still reports a grant, a Proclaim, a session's
// expiry (no leader) and the next grant. Once its context ends, the watch
// goroutine is gone (the observer's Locker still open), and the server's
// watches go with the next change, leaving none.
func TestElectionWatchPush(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h := newHarness(t, single, "")
	t.Cleanup(func() { h.Close() })
	a, b := h.open(t, ctx), h.open(t, ctx)
	// The observer's TTL sets Observe's poll: a third of an hour.
	o := conformance.NewLocker(ctx, t, h, padlock.WithTTL(time.Hour))
	watches := watchCount(t, ctx)

	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	seen := o.Election("push").Observe(octx)
	if first := <-seen; first != (padlock.Leader{}) {
		t.Fatalf("Observe's first value = %+v, want no leader", first)
	}
	var (
		mu    sync.Mutex
		last  padlock.Leader
		ended = make(chan struct{})
	)
	go func() {
		defer close(ended)
		for ld := range seen {
			mu.Lock()
			last = ld
			mu.Unlock()
		}
	}()
	reports := func(what string, want padlock.Leader) {
		t.Helper()
		padlocktest.WaitFor(t, "Observe to report "+what, h.TTL()+30*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return last == want
		})
	}

	first, err := a.Election("push").Campaign(ctx, "a1")
	if err != nil {
		t.Fatal(err)
	}
	reports("the grant", padlock.Leader{Value: "a1", Token: first.Token()})
	if err := first.Proclaim(ctx, "a2"); err != nil {
		t.Fatal(err)
	}
	reports("the Proclaim", padlock.Leader{Value: "a2", Token: first.Token()})
	// The leader's client is cut off: the server expires its session,
	// which deletes its node.
	if err := h.Kill(ctx, a); err != nil {
		t.Fatal(err)
	}
	reports("no leader after the session expired", padlock.Leader{})
	second, err := b.Election("push").Campaign(ctx, "b1")
	if err != nil {
		t.Fatal(err)
	}
	reports("the next grant", padlock.Leader{Value: "b1", Token: second.Token()})

	ocancel()
	<-ended
	padlocktest.WaitFor(t, "the watch goroutine to end", 30*time.Second, func() bool { return !watchRunning() })
	// The observer's watches (the parent's children, the leader's data)
	// fire with the resignation, and nothing sets them again.
	if err := second.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	padlocktest.WaitFor(t, "the server's watches back to before", 30*time.Second, func() bool {
		return watchCount(t, ctx) <= watches
	})
}

// watchRunning reports whether a Watch goroutine of the driver runs.
func watchRunning() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Contains(buf[:n], []byte("zookeeper.(*watcher).run"))
		}
		buf = make([]byte, 2*len(buf))
	}
}

// watchCount reads the standalone server's count of watches (mntr).
func watchCount(t *testing.T, ctx context.Context) int {
	t.Helper()
	out, err := padlocktest.FourLetter(ctx, single.Nodes()[0].Addr, "mntr")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "zk_watch_count\t"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no zk_watch_count in mntr: %q", out)
	return 0
}
