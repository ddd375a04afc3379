package etcd_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/padlocktest"
)

// candidacyValue is how the driver heads a candidacy's key (etcd/election.go):
// "E<n>:" and the value's n bytes, then the identity JSON.
func candidacyValue(v string) string { return "E" + strconv.Itoa(len(v)) + ":" + v }

// nameKeys reads the keys under name's queue, straight from the server,
// in line (create revision) order.
func nameKeys(t *testing.T, ctx context.Context, h *harness, name string) *clientv3.GetResponse {
	t.Helper()
	resp, err := h.inspector.Get(ctx, h.prefix+"/"+name+"/", clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// A deposed leader's Proclaim is refused by the server (the Txn compares
// its key's create revision), and leaves the successor's value and key as
// they were, read from the server: whether the old leader's lease ran out
// (revoked here, as the server does at expiry) or an operator
// force-released it while its lease lives. Its TTL is long, so its own
// renewal has not noticed yet and the Proclaim reaches the server.
func TestElectionDeposedProclaim(t *testing.T) {
	for _, how := range []string{"LeaseRevoked", "ForceReleased"} {
		t.Run(how, func(t *testing.T) {
			h, ctx := etcdTest(t)
			a, b, c := conformance.NewLocker(ctx, t, h), conformance.NewLocker(ctx, t, h), conformance.NewLocker(ctx, t, h)
			const name = "deposed"
			old, err := a.Election(name).Campaign(ctx, "a1", padlock.WithTTL(30*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			next := make(chan *padlock.Leadership, 1)
			go func() {
				ld, err := b.Election(name).Campaign(ctx, "b1")
				if err != nil {
					t.Error(err)
				}
				next <- ld
			}()
			waitKeys(t, ctx, h, 2) // b waits behind a
			head := nameKeys(t, ctx, h, name).Kvs[0]
			if uint64(head.CreateRevision) != old.Token() {
				t.Fatalf("the first key in line is %s (rev %d), not the leader's (%d)", head.Key, head.CreateRevision, old.Token())
			}
			switch how {
			case "LeaseRevoked":
				if _, err := h.inspector.Revoke(ctx, clientv3.LeaseID(head.Lease)); err != nil {
					t.Fatal(err)
				}
			case "ForceReleased":
				if _, err := c.ForceUnlock(ctx, name); err != nil {
					t.Fatal(err)
				}
			}
			succ := <-next
			if succ == nil {
				t.FailNow()
			}
			defer succ.Resign(ctx)
			select {
			case <-old.Done():
				t.Fatalf("the old leader's renewal noticed first (%v): the test needs its Proclaim to reach the server", old.Err())
			default:
			}
			if err := old.Proclaim(ctx, "a2"); !errors.Is(err, padlock.ErrNotHeld) {
				t.Fatalf("a deposed leader's Proclaim = %v, want ErrNotHeld", err)
			}
			after := nameKeys(t, ctx, h, name)
			if len(after.Kvs) != 1 {
				t.Fatalf("%d keys under the name after the deposed Proclaim, want the successor's alone", len(after.Kvs))
			}
			kv := after.Kvs[0]
			if uint64(kv.CreateRevision) != succ.Token() || !strings.HasPrefix(string(kv.Value), candidacyValue("b1")+"{") {
				t.Fatalf("the server has key %s (rev %d) = %q; want the successor's (rev %d) with value b1",
					kv.Key, kv.CreateRevision, kv.Value, succ.Token())
			}
			if ld, err := c.Election(name).Leader(ctx); err != nil || ld != (padlock.Leader{Value: "b1", Token: succ.Token()}) {
				t.Fatalf("Leader = %+v, %v; want b1 at %d", ld, err, succ.Token())
			}
		})
	}
}

// Proclaim replaces the value in the key and nothing else: the key keeps
// its create revision (the term's token) and its lease, the lease its
// granted TTL, all read on the server; and the hold goes on renewing the
// lease after it: the key outlives three TTLs, still the same key, and a
// second Proclaim (compared against the same create revision) works.
func TestElectionProclaimKeepsLease(t *testing.T) {
	h, ctx := etcdTest(t)
	a, c := conformance.NewLocker(ctx, t, h), conformance.NewLocker(ctx, t, h)
	const name = "proclaim"
	ttl := h.TTL()
	ld, err := a.Election(name).Campaign(ctx, "a1", padlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	before := nameKeys(t, ctx, h, name).Kvs[0]
	granted, err := h.inspector.TimeToLive(ctx, clientv3.LeaseID(before.Lease))
	if err != nil || before.Lease == 0 {
		t.Fatalf("the candidacy's lease %x: %v", before.Lease, err)
	}
	same := func(value string) {
		t.Helper()
		kvs := nameKeys(t, ctx, h, name).Kvs
		if len(kvs) != 1 {
			t.Fatalf("%d keys under the name, want the leader's", len(kvs))
		}
		kv := kvs[0]
		switch {
		case kv.CreateRevision != before.CreateRevision:
			t.Fatalf("the key's create revision %d, was %d", kv.CreateRevision, before.CreateRevision)
		case kv.Lease != before.Lease:
			t.Fatalf("the key's lease %x, was %x: Proclaim broke the lease", kv.Lease, before.Lease)
		case string(kv.Value) != candidacyValue(value)+string(before.Value[len(candidacyValue("a1")):]):
			t.Fatalf("the key's value %q, want value %q and the same identity as %q", kv.Value, value, before.Value)
		}
	}
	if err := ld.Proclaim(ctx, "a2"); err != nil {
		t.Fatal(err)
	}
	same("a2")
	// The measurement window itself: the key lives on only if its lease
	// is renewed.
	start := time.Now()
	for time.Since(start) < 3*ttl {
		select {
		case <-ld.Done():
			t.Fatalf("leadership lost after Proclaim: %v", ld.Err())
		case <-time.After(100 * time.Millisecond):
		}
		same("a2")
	}
	if err := ld.Proclaim(ctx, "a3"); err != nil {
		t.Fatalf("a second Proclaim: %v", err)
	}
	same("a3")
	after, err := h.inspector.TimeToLive(ctx, clientv3.LeaseID(before.Lease))
	if err != nil || after.GrantedTTL != granted.GrantedTTL || after.TTL <= 0 {
		t.Fatalf("the lease after Proclaim: granted %ds, %ds left (%v); granted %ds before", after.GrantedTTL, after.TTL, err, granted.GrantedTTL)
	}
	if got, err := c.Election(name).Leader(ctx); err != nil || got != (padlock.Leader{Value: "a3", Token: ld.Token()}) {
		t.Fatalf("Leader = %+v, %v; want a3 at %d", got, err, ld.Token())
	}
	if err := ld.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	waitEmpty(t, h, ctx)
}

// observePoll is the TTL of the observers below: Observe polls every
// third of it, so what they see within observeBudget of their start the
// watch pushed.
const (
	observePoll   = 300 * time.Second
	observeBudget = 80 * time.Second
)

// An Observe whose poll is 100s apart sees a Proclaim, a new term (a
// grant on the queue's hand-off) and a leader's lease running out (its
// client killed) within its first 80s: only the driver's watch can have
// told it.
func TestElectionWatchPushes(t *testing.T) {
	h, ctx := etcdTest(t)
	a, b := conformance.NewLocker(ctx, t, h), conformance.NewLocker(ctx, t, h)
	obs, err := padlock.Open(ctx, "etcd://"+h.member.Addr+h.prefix+"?ttl="+observePoll.String())
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	const name = "pushed"
	first, err := a.Election(name).Campaign(ctx, "a1", padlock.WithTTL(h.TTL()))
	if err != nil {
		t.Fatal(err)
	}
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	seen := obs.Election(name).Observe(octx)
	expect := func(what string, want padlock.Leader) {
		t.Helper()
		timeout := time.NewTimer(observeBudget - time.Since(start))
		defer timeout.Stop()
		for {
			select {
			case got, ok := <-seen:
				if !ok {
					t.Fatalf("Observe closed before %s", what)
				}
				if got == want {
					return
				}
			case <-timeout.C:
				t.Fatalf("%s (%+v) not observed within %v of Observe's start, before its first poll: not pushed", what, want, observeBudget)
			}
		}
	}
	expect("the first leader", padlock.Leader{Value: "a1", Token: first.Token()})
	if err := first.Proclaim(ctx, "a2"); err != nil {
		t.Fatal(err)
	}
	expect("a Proclaim", padlock.Leader{Value: "a2", Token: first.Token()})
	next := make(chan *padlock.Leadership, 1)
	go func() {
		ld, err := b.Election(name).Campaign(ctx, "b1", padlock.WithTTL(h.TTL()))
		if err != nil {
			t.Error(err)
		}
		next <- ld
	}()
	waitKeys(t, ctx, h, 2)
	if err := first.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	succ := <-next
	if succ == nil {
		t.FailNow()
	}
	expect("a new term", padlock.Leader{Value: "b1", Token: succ.Token()})
	if err := h.Kill(ctx, b); err != nil {
		t.Fatal(err)
	}
	expect("the leader's lease running out", padlock.Leader{})
}

// An Observe started while its client is cut off from the server, for
// three of its request timeouts, gets its push once the connection is
// back: the watch is made when it can be, and says so. Its poll is 200s
// apart; it sees the leader and then a Proclaim within its first 150s.
func TestElectionWatchAfterOutage(t *testing.T) {
	h, ctx := etcdTest(t)
	a := conformance.NewLocker(ctx, t, h)
	p, err := padlocktest.NewProxy(h.member.Addr)
	if err != nil {
		t.Fatal(err)
	}
	const poll, budget = 600 * time.Second, 150 * time.Second
	obs, err := h.proxies.Open(ctx, func(addrs string) string { return h.lockerURL(addrs) + "?request_timeout=1s&ttl=" + poll.String() },
		[]*padlocktest.Proxy{p})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	const name = "outage"
	ld, err := a.Election(name).Campaign(ctx, "a1")
	if err != nil {
		t.Fatal(err)
	}
	restore := h.proxies.Cut(obs)
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	seen := obs.Election(name).Observe(octx)
	if _, err := obs.Election(name).Leader(ctx); !errors.Is(err, padlock.ErrUnavailable) {
		t.Fatalf("Leader through the cut = %v, want ErrUnavailable", err)
	}
	select {
	case <-time.After(3 * time.Second): // the outage itself
	case got := <-seen:
		t.Fatalf("Observe sent %+v through the cut", got)
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	expect := func(what string, want padlock.Leader) {
		t.Helper()
		timeout := time.NewTimer(budget - time.Since(start))
		defer timeout.Stop()
		for {
			select {
			case got := <-seen:
				if got == want {
					return
				}
			case <-timeout.C:
				t.Fatalf("%s (%+v) not observed within %v of Observe's start, before its first poll: not pushed", what, want, budget)
			}
		}
	}
	expect("the leader after the outage", padlock.Leader{Value: "a1", Token: ld.Token()})
	if err := ld.Proclaim(ctx, "a2"); err != nil {
		t.Fatal(err)
	}
	expect("a Proclaim", padlock.Leader{Value: "a2", Token: ld.Token()})
	if err := ld.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

// Observe's watch ends with its ctx, while the Locker stays open: its
// channel closes, the server counts no watcher of it any more, and no
// goroutine of it (nor of clientv3's watch stream) is left.
func TestElectionWatchReleased(t *testing.T) {
	h, ctx := etcdTest(t)
	addr := h.member.Addr
	obs, err := padlock.Open(ctx, "etcd://"+addr+h.prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	watchers := func() int { return int(metric(t, ctx, addr, "etcd_debugging_mvcc_watcher_total ")) }
	if _, err := obs.Election("released").Leader(ctx); !errors.Is(err, padlock.ErrNoLeader) {
		t.Fatalf("Leader = %v, want ErrNoLeader", err)
	}
	ignore := goleak.IgnoreCurrent()
	base := watchers()
	octx, cancel := context.WithCancel(ctx)
	seen := obs.Election("released").Observe(octx)
	if ld := <-seen; ld != (padlock.Leader{}) {
		t.Fatalf("Observe sent %+v first, want no leader", ld)
	}
	padlocktest.WaitFor(t, "Observe's watcher on the server", time.Minute, func() bool { return watchers() == base+1 })
	cancel()
	closed := time.After(time.Minute)
	for open := true; open; {
		select {
		case _, open = <-seen:
		case <-closed:
			t.Fatal("Observe's channel still open a minute after its ctx ended")
		}
	}
	padlocktest.WaitFor(t, "the server's watcher gone", time.Minute, func() bool { return watchers() == base })
	goleak.VerifyNone(t, append(padlocktest.LeakIgnores(), ignore)...)
}

// A candidacy's value takes any bytes (a '{' that begins the identity
// JSON elsewhere, invalid UTF-8, nothing at all): Leader reads it back,
// Holders reports it with Elect and the identity intact, and a force
// release removes it with its key. A plain Lock on a name is no leader,
// and its key's value is what a mutex's always was.
func TestElectionValuesAndInspection(t *testing.T) {
	h, ctx := etcdTest(t)
	a, c := conformance.NewLocker(ctx, t, h), conformance.NewLocker(ctx, t, h)
	for i, v := range []string{`{"host":"x","pid":1}`, "\xff\xfe:E3:", ""} {
		name := "value" + strconv.Itoa(i)
		ld, err := a.Election(name).Campaign(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := c.Election(name).Leader(ctx); err != nil || got != (padlock.Leader{Value: v, Token: ld.Token()}) {
			t.Fatalf("Leader = %+v, %v; want %q at %d", got, err, v, ld.Token())
		}
		hs, err := c.Holders(ctx, name)
		if err != nil || len(hs) != 1 {
			t.Fatalf("Holders = %+v, %v; want the candidacy", hs, err)
		}
		if hd := hs[0]; !hd.Elect || hd.Value != v || hd.PID != os.Getpid() || hd.Token != ld.Token() {
			t.Fatalf("Holders reports %+v; want a candidacy of value %q, pid %d, token %d", hd, v, os.Getpid(), ld.Token())
		}
		if _, err := c.ForceUnlock(ctx, name); err != nil {
			t.Fatal(err)
		}
		if got, err := c.Election(name).Leader(ctx); !errors.Is(err, padlock.ErrNoLeader) {
			t.Fatalf("Leader after a force release = %+v, %v; want ErrNoLeader", got, err)
		}
		if n := len(nameKeys(t, ctx, h, name).Kvs); n != 0 {
			t.Fatalf("%d keys left under the name after a force release", n)
		}
		select {
		case <-ld.Done():
		case <-time.After(time.Minute):
			t.Fatal("the force-released leader's Done did not close within a minute")
		}
		if !errors.Is(ld.Err(), padlock.ErrLost) {
			t.Fatalf("the force-released leader's Err = %v, want ErrLost", ld.Err())
		}
	}
	lk := must(t)(a.Lock(ctx, "plain"))
	// A mutex's key holds what it always held: its identity JSON alone.
	if kvs := nameKeys(t, ctx, h, "plain").Kvs; len(kvs) != 1 || !strings.HasPrefix(string(kvs[0].Value), "{") {
		t.Fatalf("a plain Lock's key on the server: %v, want one key whose value is its identity JSON", kvs)
	}
	if got, err := c.Election("plain").Leader(ctx); !errors.Is(err, padlock.ErrNoLeader) {
		t.Fatalf("Leader of a name held by a plain Lock = %+v, %v; want ErrNoLeader", got, err)
	}
	if hs, err := c.Holders(ctx, "plain"); err != nil || len(hs) != 1 || hs[0].Elect || hs[0].Value != "" {
		t.Fatalf("Holders of a plain Lock = %+v, %v", hs, err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	waitEmpty(t, h, ctx)
}

// On a 3-member cluster, a member that loses its quorum for longer than
// three election timeouts cancels the watches that require a leader, as
// the driver's does: Observe's watch is made again once the quorum is
// back, and pushes what follows (the old leader's lease running out, a new
// term) to an Observe polling every 200s, within its first 150s.
func TestElectionWatchQuorumLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, err := padlocktest.New(ctx, padlocktest.Etcd, padlocktest.Nodes(3))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	ignore := goleak.IgnoreCurrent()
	const poll, budget = 600 * time.Second, 150 * time.Second
	m := cluster.Nodes()
	obs, err := padlock.Open(ctx, "etcd://"+m[0].Addr+"/quorum?ttl="+poll.String())
	if err != nil {
		t.Fatal(err)
	}
	a, err := padlock.Open(ctx, "etcd://"+cluster.Addrs()+"/quorum")
	if err != nil {
		t.Fatal(err)
	}
	const name = "quorum"
	first, err := a.Election(name).Campaign(ctx, "a1", padlock.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	watchers := func() int { return int(metric(t, ctx, m[0].Addr, "etcd_debugging_mvcc_watcher_total ")) }
	base := watchers()
	octx, stop := context.WithCancel(ctx)
	start := time.Now()
	seen := obs.Election(name).Observe(octx)
	expect := func(what string, want padlock.Leader) {
		t.Helper()
		timeout := time.NewTimer(budget - time.Since(start))
		defer timeout.Stop()
		for {
			select {
			case got := <-seen:
				if got == want {
					return
				}
			case <-timeout.C:
				t.Fatalf("%s (%+v) not observed within %v of Observe's start, before its first poll: not pushed", what, want, budget)
			}
		}
	}
	expect("the first leader", padlock.Leader{Value: "a1", Token: first.Token()})
	padlocktest.WaitFor(t, "Observe's watcher on member 0", time.Minute, func() bool { return watchers() == base+1 })
	for _, n := range m[1:] {
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	padlocktest.WaitFor(t, "member 0 cancelling the watch that requires a leader", time.Minute, func() bool { return watchers() == base })
	for _, n := range m[1:] {
		if err := n.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The old leader lost its term in the outage; its key goes with its
	// lease once a leader runs the cluster again.
	expect("the old leader's lease running out", padlock.Leader{})
	b, err := padlock.Open(ctx, "etcd://"+cluster.Addrs()+"/quorum")
	if err != nil {
		t.Fatal(err)
	}
	next, err := b.Election(name).Campaign(ctx, "b1")
	if err != nil {
		t.Fatal(err)
	}
	expect("a new term", padlock.Leader{Value: "b1", Token: next.Token()})
	if next.Token() <= first.Token() {
		t.Errorf("the new term's token %d is not above the old one's %d", next.Token(), first.Token())
	}
	select {
	case <-first.Done():
	case <-time.After(time.Minute):
		t.Fatal("the old leader's Done still open a minute after its quorum came back")
	}
	if err := next.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	stop()
	for range seen {
	}
	for _, l := range []*padlock.Locker{obs, a, b} {
		l.Close()
	}
	goleak.VerifyNone(t, append(padlocktest.LeakIgnores(), ignore)...)
}
