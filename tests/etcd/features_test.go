package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/etcd"
	"github.com/padlock-go/padlock/padlocktest"
)

// Holds on one Locker share its session lease, and their renewals are
// coalesced: 100 held names must cost the server about one keep-alive per
// renewal period, not one per hold. Counted on the server, from its
// etcd_debugging_lease_renewed_total metric.
func TestRenewalsCoalesced(t *testing.T) {
	h, ctx := etcdTest(t)
	const n = 100
	ttl := h.TTL()
	a := conformance.NewLocker(ctx, t, h, padlock.WithTTL(ttl))
	var held []*padlock.Lock
	for i := range n {
		lk, err := a.Lock(ctx, fmt.Sprintf("coalesce/%d", i))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, lk)
	}
	before := leaseRenewals(t, ctx)
	start := time.Now()
	select {
	case <-held[0].Done():
		t.Fatalf("hold lost: %v", held[0].Err())
	case <-time.After(3 * ttl): // the measurement window itself
	}
	renewals := leaseRenewals(t, ctx) - before
	periods := time.Since(start) / (ttl / 3)
	t.Logf("%d holds for %v: %d keep-alives on the server (%d renewal periods)", n, time.Since(start).Round(time.Millisecond), renewals, periods)
	// Uncoalesced would be n per period (900 here); allow scheduling jitter
	// several times over one per period.
	if limit := 4 * int(periods+1); renewals > limit {
		t.Errorf("%d keep-alives for %d holds over %d periods: renewals are not coalesced (limit %d)", renewals, n, periods, limit)
	}
	for _, lk := range held {
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// The session's keeper keeps a waiter's queue key alive for as long as it
// waits, with no hold on that Locker to renew anything, and an idle Locker
// sends no keep-alives at all.
func TestKeeperKeepsWaitersAndIdlesQuietly(t *testing.T) {
	h, ctx := etcdTest(t)
	ttl := h.TTL()
	a := conformance.NewLocker(ctx, t, h, padlock.WithTTL(ttl))
	b := conformance.NewLocker(ctx, t, h, padlock.WithTTL(ttl))
	lk, err := a.Lock(ctx, "keeper")
	if err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() {
		lk2, err := b.Lock(ctx, "keeper")
		if err == nil {
			err = lk2.Unlock(ctx)
		}
		res <- err
	}()
	waitKeys(t, ctx, h, 2)
	select {
	case err := <-res:
		t.Fatalf("the waiter returned while the lock was held: %v", err)
	case <-time.After(3 * ttl): // longer than the waiter's lease: only its keeper keeps it
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err != nil {
		t.Fatalf("the waiter, after waiting 3×TTL: %v", err)
	}
	// Both Lockers are idle now: their keepers send nothing.
	waitKeys(t, ctx, h, 0)
	before := leaseRenewals(t, ctx)
	time.Sleep(2 * ttl) // the measurement window itself
	if n := leaseRenewals(t, ctx) - before; n > 0 {
		t.Errorf("idle Lockers sent %d keep-alives in 2×TTL, want none", n)
	}
}

// contend runs rounds Lock/Unlock cycles of name on every Locker in ls,
// with workers goroutines on each, holding the lock for hold. It fails the
// test if two ever hold it at once or a token does not exceed the last
// holder's, and returns how many acquisitions there were.
func contend(t *testing.T, ctx context.Context, ls []*padlock.Locker, workers, rounds int, name string, hold time.Duration) int {
	t.Helper()
	var (
		mu        sync.Mutex
		lastToken uint64
		inside    atomic.Int32
		count     atomic.Int64
		wg        sync.WaitGroup
	)
	for _, l := range ls {
		for range workers {
			wg.Go(func() {
				for range rounds {
					lk, err := l.Lock(ctx, name)
					if err != nil {
						t.Error(err)
						return
					}
					if n := inside.Add(1); n != 1 {
						t.Errorf("%d holders at once", n)
					}
					mu.Lock()
					if tok := lk.Token(); tok <= lastToken {
						t.Errorf("token %d after %d", tok, lastToken)
					} else {
						lastToken = tok
					}
					mu.Unlock()
					time.Sleep(hold) // the work done under the lock
					inside.Add(-1)
					if err := lk.Unlock(ctx); err != nil {
						t.Error(err)
						return
					}
					count.Add(1)
				}
			})
		}
	}
	wg.Wait()
	return int(count.Load())
}

// A name used again and again keeps a bounded set of keys: each Locker
// reuses its key slots, so etcd's index (which keeps a deleted key until
// compaction, and which every range over the name walks) does not grow
// with every acquisition. Counted from a watch on the name: every key ever
// created under it shows up as a put.
func TestKeySlotsReused(t *testing.T) {
	h, ctx := etcdTest(t)
	ls := []*padlock.Locker{conformance.NewLocker(ctx, t, h), conformance.NewLocker(ctx, t, h)}
	const workers, rounds = 3, 20
	name := "slots"
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	wch := h.inspector.Watch(wctx, h.prefix+"/"+name+"/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	if resp := <-wch; !resp.Created {
		t.Fatalf("watch not created: %v", resp.Err())
	}
	n := contend(t, ctx, ls, workers, rounds, name, 0)

	// Every event up to now: a progress notice follows them.
	if err := h.inspector.RequestProgress(wctx); err != nil {
		t.Fatal(err)
	}
	keys := map[string]int{}
	for progress := false; !progress; {
		resp := <-wch
		if err := resp.Err(); err != nil {
			t.Fatal(err)
		}
		for _, ev := range resp.Events {
			if ev.Type == mvccpb.PUT {
				keys[string(ev.Kv.Key)]++
			}
		}
		progress = resp.IsProgressNotify()
	}
	puts := 0
	for _, c := range keys {
		puts += c
	}
	t.Logf("%d acquisitions: %d puts on %d distinct keys", n, puts, len(keys))
	if puts != n {
		t.Errorf("%d puts for %d acquisitions", puts, n)
	}
	if limit := len(ls) * workers; len(keys) > limit {
		t.Errorf("%d distinct keys for %d acquisitions by %d goroutines: keys are not reused", len(keys), n, limit)
	}
	waitEmpty(t, h, ctx)
}

// A hand-off reads nothing: the next holder learns from a watch event
// that its key is now the oldest. Counted on a server of the test's own
// (so no other test's requests are counted): each acquisition costs its
// put Txn and its release Txn, and the only reads are one queue read per
// Locker when it starts following the name.
func TestHandOffWithoutReads(t *testing.T) {
	_, ctx := etcdTest(t)
	srv, err := padlocktest.New(ctx, padlocktest.Etcd, padlocktest.Nodes(1))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	addr := srv.Nodes()[0].Addr
	const clients, rounds = 4, 25
	var ls []*padlock.Locker
	logs := &recorder{}
	for range clients {
		l, err := padlock.Open(ctx, "etcd://"+addr+"/handoff", padlock.WithLogger(slog.New(logs)))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ls = append(ls, l)
	}
	rpcs := func(method string) float64 {
		return metric(t, ctx, addr, "grpc_server_handled_total{", fmt.Sprintf("grpc_method=%q", method))
	}
	txns, ranges := rpcs("Txn"), rpcs("Range")
	n := contend(t, ctx, ls, 1, rounds, "hot", 2*time.Millisecond)
	txns, ranges = rpcs("Txn")-txns, rpcs("Range")-ranges
	t.Logf("%d acquisitions: %v Txn, %v Range requests", n, txns, ranges)
	if want := float64(2 * n); txns != want {
		t.Errorf("%v Txn requests for %d acquisitions, want %v (a put and a release each)", txns, n, want)
	}
	if ranges < 1 {
		t.Errorf("no Locker ever waited: the test did not contend")
	}
	// A Locker reads the queue again only after its queue ended, which it
	// does when it has no waiter and sees the name free (a loaded machine
	// can leave the name free for a moment between two rounds).
	drains := 0
	for _, m := range logs.messages() {
		if strings.Contains(m, "etcd queue drained") {
			drains++
		}
	}
	if ranges > float64(clients+drains) {
		t.Errorf("%v Range requests for %d Lockers and %d drained queues: waiters read on their hand-offs (want at most one per Locker and drain)", ranges, clients, drains)
	}
}

// A Locker whose waiters are gone ends its watch on the name as soon as it
// sees the name free, not a linger later: contention is over, and an idle
// watch makes every later put and delete on the name fan out to it.
func TestIdleWatchEndsWhenNameFree(t *testing.T) {
	h, ctx := etcdTest(t)
	a := conformance.NewLocker(ctx, t, h, padlock.WithTTL(5*time.Second))
	logs := &recorder{}
	b := conformance.NewLocker(ctx, t, h, padlock.WithTTL(5*time.Second), padlock.WithLogger(slog.New(logs)))
	watchers := func() float64 { return metric(t, ctx, h.member.Addr, "etcd_debugging_mvcc_watcher_total ") }
	base := watchers()
	lk, err := a.Lock(ctx, "drain")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *padlock.Lock, 1)
	go func() {
		lk, err := b.Lock(ctx, "drain")
		if err != nil {
			t.Error(err)
		}
		got <- lk
	}()
	padlocktest.WaitFor(t, "b queued and watching", time.Minute, func() bool {
		s, _ := h.State(ctx)
		return len(s) == 2 && watchers() > base
	})
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lk2 := <-got
	if lk2 == nil {
		t.FailNow()
	}
	// b holds the name and has no waiter: the name is not free yet, so b
	// keeps its watch (contention may go on).
	if logs.has("etcd queue drained") {
		t.Fatalf("b's queue ended while b held the name: %q", logs.messages())
	}
	if err := lk2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	padlocktest.WaitFor(t, "b's queue drained on seeing the name free", time.Minute, func() bool { return logs.has("etcd queue drained") })
	padlocktest.WaitFor(t, "b's watch gone from the server", time.Minute, func() bool { return watchers() == base })
	// A later wait starts a new queue and is still granted.
	lk, err = a.Lock(ctx, "drain")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		lk, err := b.Lock(ctx, "drain")
		if err != nil {
			t.Error(err)
		}
		got <- lk
	}()
	padlocktest.WaitFor(t, "b queued again", time.Minute, func() bool {
		s, _ := h.State(ctx)
		return len(s) == 2 && watchers() > base
	})
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if lk2 = <-got; lk2 == nil {
		t.FailNow()
	}
	if err := lk2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// etcd.New builds a Locker over the application's own client, and closing
// the Locker revokes its lease (its keys go) but leaves the client working.
func TestNewOverExistingClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{server.Nodes()[0].Addr},
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	l, err := etcd.New(ctx, cli, "/existing-client", padlock.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Lock(ctx, "n"); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "/existing-client/n/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 1 {
		t.Fatalf("the hold is not under the given prefix: count %d, %v", resp.Count, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	resp, err = cli.Get(ctx, "/existing-client/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("the application's client stopped working after Locker.Close: %v", err)
	}
	if resp.Count != 0 {
		t.Errorf("Close left %d keys", resp.Count)
	}
	if _, err := etcd.New(ctx, nil, ""); !errors.Is(err, padlock.ErrInvalidOption) {
		t.Errorf("New with a nil client = %v, want ErrInvalidOption", err)
	}
}

// A renewal of more than one Txn's worth of holds (128) on one session
// checks them against the keys its lease has attached, in one request
// (LeaseTimeToLive), and still finds a force-released one: that hold's
// Done closes with ErrLost, and none of the others is lost.
func TestManyHoldsRenewalFindsForcedRelease(t *testing.T) {
	_, ctx := etcdTest(t)
	srv, err := padlocktest.New(ctx, padlocktest.Etcd, padlocktest.Nodes(1))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	addr := srv.Nodes()[0].Addr
	a, err := padlock.Open(ctx, "etcd://"+addr+"/many?ttl=6s")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	op, err := padlock.Open(ctx, "etcd://"+addr+"/many")
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	const n = 300
	held := make([]*padlock.Lock, n)
	for i := range held {
		if held[i], err = a.Lock(ctx, fmt.Sprintf("n/%03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	ttlCalls := func() float64 {
		return metric(t, ctx, addr, "grpc_server_handled_total{", `grpc_method="LeaseTimeToLive"`)
	}
	// Renewed together at least once, in a batch of more than 128.
	before := ttlCalls()
	padlocktest.WaitFor(t, "a renewal that asks the lease for its keys", time.Minute, func() bool { return ttlCalls() > before })
	if _, err := op.ForceUnlock(ctx, "n/123"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held[123].Done():
	case <-time.After(time.Minute):
		t.Fatal("the force-released hold's Done did not close within a minute")
	}
	if err := held[123].Err(); !errors.Is(err, padlock.ErrLost) {
		t.Errorf("force-released hold: Err() = %v, want ErrLost", err)
	}
	// Another renewal of the rest, after the loss: none of them is lost.
	before = ttlCalls()
	padlocktest.WaitFor(t, "a renewal after the loss", time.Minute, func() bool { return ttlCalls() > before })
	for i, lk := range held {
		if i == 123 {
			continue
		}
		select {
		case <-lk.Done():
			t.Fatalf("hold %d lost: %v", i, lk.Err())
		default:
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// An idle session replaced for want of headroom (a new acquisition came
// when less than a third of its lease was left before its deadline, but
// before that deadline) is left to expire on its own: its keeper, asleep
// while the session is idle, ends at the session's deadline. It slept an
// hour, one goroutine and timer for each such replacement, on a Locker
// that locks a name now and then.
func TestReplacedIdleSessionsKeeperEnds(t *testing.T) {
	h, ctx := etcdTest(t)
	const ttl = 2 * time.Second // etcd grants whole seconds
	l := conformance.NewLocker(ctx, t, h, padlock.WithTTL(ttl))
	keepers := func() int {
		buf := make([]byte, 1<<20)
		return strings.Count(string(buf[:runtime.Stack(buf, true)]), "etcd.(*session).keep(")
	}
	lk, err := l.Lock(ctx, "replaced")
	if err != nil {
		t.Fatal(err)
	}
	granted := time.Now() // the session's lease, granted for this Lock, is no older
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Past two thirds of the lease, short of its deadline (TTL less a
	// twentieth and 50ms): the next Lock takes a new lease, and the idle
	// one, still usable, is kept for what it had.
	time.Sleep(time.Until(granted.Add(ttl * 3 / 4))) // the scenario's timing, not a condition
	lk, err = l.Lock(ctx, "replaced")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(ctx)
	padlocktest.WaitFor(t, "one keeper left: the held session's", 30*time.Second, func() bool { return keepers() == 1 })
}

// An acquisition that needs a new lease while another acquisition's Grant
// is slow (the path silent) waits for it no longer than its own context
// allows: Grants go one at a time, and the wait for the other's used to
// ignore the context, holding a TryLock of a few hundred milliseconds for
// the other Grant's whole request timeout (5s).
func TestGrantWaitHonoursContext(t *testing.T) {
	h, ctx := etcdTest(t)
	l := conformance.NewLocker(ctx, t, h, padlock.WithTTL(2*time.Second))
	restore, err := h.Blackhole(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	first := make(chan error, 1)
	go func() {
		lk, err := l.TryLock(ctx, "grant/a")
		if err == nil {
			lk.Unlock(ctx)
		}
		first <- err
	}()
	padlocktest.WaitFor(t, "the first acquisition's Grant on the silent path", time.Minute, func() bool {
		buf := make([]byte, 1<<20)
		return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "(*lessor).Grant(")
	})
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = l.TryLock(tctx, "grant/b")
	took := time.Since(start)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, padlock.ErrTimeout) {
		t.Errorf("TryLock while another Grant hangs: %v, want its context's deadline", err)
	}
	if took > 3*time.Second {
		t.Errorf("TryLock with a 300ms context returned after %v: it waited for the other acquisition's Grant", took)
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	<-first
}

// A put whose outcome is unknown may be applied after the delete meant to
// clean it up found nothing (a proposal delayed across a leader change):
// its key, bound to the session lease that the Locker's other holds keep
// alive, would block the name for every other client for as long as the
// Locker lives. The key becomes a suspect of its session, which deletes it
// when it shows up while its slot is free.
//
// The test makes a TryLock's put fail on a silent path (its outcome
// unknown to the driver), lets the clean-up finish, then puts the key the
// late proposal would have put, on the same lease, through a client of its
// own: that is the late apply. Another Locker must then get the name.
func TestOrphanOfAnUnknownPutDeleted(t *testing.T) {
	h, ctx := etcdTest(t)
	h.url = func(addr, prefix string) string { return "etcd://" + addr + prefix + "?request_timeout=1s" }
	l := conformance.NewLocker(ctx, t, h, padlock.WithTTL(10*time.Second))
	held, err := l.Lock(ctx, "orphan/held") // keeps the session lease in use
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h.inspector.Get(ctx, h.prefix+"/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("server state: %v, %v; want the one held key", resp, err)
	}
	heldKey, lease := string(resp.Kvs[0].Key), clientv3.LeaseID(resp.Kvs[0].Lease)
	driverID := heldKey[strings.LastIndex(heldKey, "/")+1 : strings.LastIndex(heldKey, "-")]

	restore, err := h.Blackhole(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryLock(ctx, "orphan/x"); err == nil {
		t.Fatal("TryLock on a silent path succeeded")
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	// The clean-up has found nothing and freed the key's slot once a new
	// acquisition of "orphan/x" gets slot 0 again.
	slot0 := h.prefix + "/orphan%2Fx/" + driverID + "-0"
	padlocktest.WaitFor(t, "the failed put's slot freed", time.Minute, func() bool {
		lk, err := l.TryLock(ctx, "orphan/x")
		if err != nil {
			return false
		}
		defer lk.Unlock(ctx)
		resp, err := h.inspector.Get(ctx, slot0, clientv3.WithKeysOnly())
		return err == nil && len(resp.Kvs) == 1
	})
	// The late apply: the failed put's key, on the failed put's lease.
	if _, err := h.inspector.Put(ctx, slot0, "late", clientv3.WithLease(lease)); err != nil {
		t.Fatalf("late put on the session's lease: %v", err)
	}
	other := conformance.NewLocker(ctx, t, h)
	wctx, cancel := context.WithTimeout(ctx, 45*time.Second) // the lease's keep-alive period is 3.3s
	defer cancel()
	lk, err := other.Lock(wctx, "orphan/x")
	if err != nil {
		t.Fatalf("another Locker's Lock with the late key on the live lease: %v", err)
	}
	lk.Unlock(ctx)
	select {
	case <-held.Done():
		t.Fatalf("the session's own hold was lost: %v", held.Err())
	default:
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	waitEmpty(t, h, ctx)
}

// A LockAll whose one request fails with an unknown outcome (the path
// silent) deletes every name's key in the background, and waits for the
// first attempts at most a second in all: it waited a second per name,
// 30 seconds here, before it returned its error.
func TestLockAllCleanupInAnOutageWaitsOnce(t *testing.T) {
	h, ctx := etcdTest(t)
	h.url = func(addr, prefix string) string { return "etcd://" + addr + prefix + "?request_timeout=1s" }
	l := conformance.NewLocker(ctx, t, h, padlock.WithTTL(10*time.Second))
	held, err := l.Lock(ctx, "outage/held") // the session, so the LockAll needs no Grant
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 30)
	for i := range names {
		names[i] = fmt.Sprintf("outage/%02d", i)
	}
	restore, err := h.Blackhole(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	locks, err := l.LockAll(ctx, names)
	took := time.Since(start)
	if err == nil || locks != nil {
		t.Fatalf("LockAll on a silent path = %v, %v; want an error", locks, err)
	}
	// One request timeout (1s) and one clean-up wait (1s), with room for a
	// busy machine; a wait per name takes 30s more.
	if took > 15*time.Second {
		t.Errorf("LockAll of %d names on a silent path returned after %v: its clean-up waited name by name", len(names), took.Round(time.Millisecond))
	}
	t.Logf("LockAll of %d names on a silent path: %v", len(names), took.Round(time.Millisecond))
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	// The restored path's first request may meet the connection the
	// silence broke: the release then finishes in the background.
	if err := held.Unlock(ctx); err != nil && !errors.Is(err, padlock.ErrUnavailable) {
		t.Fatal(err)
	}
	waitEmpty(t, h, ctx)
}
