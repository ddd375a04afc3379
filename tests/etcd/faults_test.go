package etcd_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/padlocktest"
	"github.com/padlock-go/padlock/padlocktest/fenced"
)

// etcdTest is a harness with the helpers these tests share.
func etcdTest(t *testing.T) (*harness, context.Context) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	h := newHarness(t, server.Nodes()[0])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(func() {
		cancel()
		h.Close()
		if !t.Failed() {
			goleak.VerifyNone(t, append(padlocktest.LeakIgnores(), ignore)...)
		}
	})
	return h, ctx
}

func open(t *testing.T, h *harness, ctx context.Context, opts ...padlock.OpenOption) *padlock.Locker {
	t.Helper()
	l, err := h.NewLocker(ctx, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func waitFor(t *testing.T, ctx context.Context, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// A waiter whose watch resumes from a compacted revision must re-read the
// queue and still acquire when the holder releases.
func TestWaiterSurvivesCompaction(t *testing.T) {
	h, ctx := etcdTest(t)
	a := open(t, h, ctx, padlock.WithTTL(5*time.Second))
	// The waiter's log shows that its watch did end on the compaction
	// (and was not, say, restarted for another reason before it).
	logs := &recorder{}
	b := open(t, h, ctx, padlock.WithTTL(5*time.Second), padlock.WithLogger(slog.New(logs)))
	lk, err := a.Lock(ctx, "compact")
	if err != nil {
		t.Fatal(err)
	}
	watchers := func() float64 { return metric(t, ctx, h.member.Addr, "etcd_debugging_mvcc_watcher_total ") }
	before := watchers()
	res := make(chan error, 1)
	go func() {
		lk, err := b.Lock(ctx, "compact")
		if err == nil {
			err = lk.Unlock(ctx)
		}
		res <- err
	}()
	// Queued and watching: its key is on the server, and so is its watch,
	// which it sets up only once its put has answered (a cut before that
	// answer is an ambiguous acquire, which fails the Lock clearly; that is
	// another test's subject).
	waitFor(t, ctx, "waiter queued and watching", func() bool {
		s, _ := h.State(ctx)
		return len(s) == 2 && watchers() > before
	})

	// Cut the waiter off, move the revision on and compact it away, so the
	// watch resumes from a revision that no longer exists.
	restore, _ := h.Cut(ctx, b)
	var rev int64
	for i := range 20 {
		resp, err := h.inspector.Put(ctx, fmt.Sprintf("/padlock-test/compaction-filler/%d", i), "x")
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	if _, err := h.inspector.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	h.inspector.Delete(ctx, "/padlock-test/compaction-filler/", clientv3.WithPrefix())
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err != nil {
		t.Fatalf("waiter after compaction: %v", err)
	}
	if !logs.has("etcd queue watch compacted") {
		t.Errorf("the waiter's watch never ended on the compaction; its log: %q", logs.messages())
	}
}

// recorder is a slog handler that keeps every record's message.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func (r *recorder) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs)
}

func (r *recorder) has(sub string) bool {
	return slices.ContainsFunc(r.messages(), func(m string) bool { return strings.Contains(m, sub) })
}

// Unlock deletes only the key it created: if the key was deleted and
// re-created meanwhile (a newer hold), the stale Unlock must not touch it.
func TestUnlockGuardedByCreateRevision(t *testing.T) {
	h, ctx := etcdTest(t)
	a := open(t, h, ctx)
	lk, err := a.Lock(ctx, "guarded")
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := h.State(ctx)
	if len(keys) != 1 {
		t.Fatalf("state %q, want one key", keys)
	}
	if _, err := h.inspector.Delete(ctx, keys[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := h.inspector.Put(ctx, keys[0], "newer"); err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(ctx); !errors.Is(err, padlock.ErrNotHeld) {
		t.Errorf("stale Unlock = %v, want ErrNotHeld", err)
	}
	resp, err := h.inspector.Get(ctx, keys[0])
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the newer key was deleted by a stale Unlock (err %v)", err)
	}
	h.inspector.Delete(ctx, keys[0])
}

// When the session lease is revoked behind the client's back, every hold
// on it closes Done with ErrLost, and others can acquire.
func TestLeaseLossClosesEveryHold(t *testing.T) {
	h, ctx := etcdTest(t)
	a, b := open(t, h, ctx), open(t, h, ctx)
	l1, err := a.Lock(ctx, "one")
	if err != nil {
		t.Fatal(err)
	}
	l2, err := a.Lock(ctx, "two")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h.inspector.Get(ctx, h.prefix+"/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 2 || resp.Kvs[0].Lease != resp.Kvs[1].Lease {
		t.Fatalf("want two keys on one session lease, got %v (err %v)", resp.Kvs, err)
	}
	if _, err := h.inspector.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	for _, lk := range []*padlock.Lock{l1, l2} {
		select {
		case <-lk.Done():
		case <-ctx.Done():
			t.Fatalf("%s: Done still open after its lease was revoked", lk.Name())
		}
		if !errors.Is(lk.Err(), padlock.ErrLost) {
			t.Errorf("%s: Err = %v, want ErrLost", lk.Name(), lk.Err())
		}
		lk2, err := b.TryLock(ctx, lk.Name())
		if err != nil {
			t.Fatalf("TryLock after the lease was revoked: %v", err)
		}
		lk2.Unlock(ctx)
	}
	// The Locker recovers: a new session serves new holds.
	l3, err := a.Lock(ctx, "three")
	if err != nil {
		t.Fatalf("Lock after the session was lost: %v", err)
	}
	l3.Unlock(ctx)
}

// Killing the leader of a 3-member cluster under load: mutual exclusion
// holds, tokens keep increasing, and locking goes on after the failover.
func TestLeaderFailover(t *testing.T) {
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

	url := "etcd://" + cluster.Addrs() + "/failover?ttl=5s"
	var lockers []*padlock.Locker
	for range 3 {
		l, err := padlock.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		lockers = append(lockers, l)
	}
	var (
		store          = fenced.NewStore()
		inside         atomic.Int32
		overlaps, errs atomic.Int64
		afterKill      atomic.Int64
		killed         atomic.Bool
		wg             sync.WaitGroup
	)
	runCtx, stop := context.WithCancel(ctx)
	for _, l := range lockers {
		for range 2 {
			wg.Go(func() {
				for i := 0; i < 2000 && runCtx.Err() == nil; i++ {
					lk, err := l.Lock(runCtx, "leader-failover", padlock.WithWait(20*time.Second))
					if err != nil {
						if runCtx.Err() == nil {
							errs.Add(1)
						}
						continue
					}
					if inside.Add(1) > 1 {
						overlaps.Add(1)
					}
					store.Write("x", lk.Token(), 1)
					inside.Add(-1)
					lk.Unlock(ctx)
					if killed.Load() {
						afterKill.Add(1)
					}
				}
			})
		}
	}
	waitFor(t, ctx, "load running", func() bool { return store.Accepted() > 50 })
	leader := leaderOf(t, ctx, cluster)
	t.Logf("killing leader %s", leader.Addr)
	leader.Kill()
	killed.Store(true)
	waitFor(t, ctx, "locking after the failover", func() bool { return afterKill.Load() > 50 })
	if err := leader.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stop()
	wg.Wait()
	for _, l := range lockers {
		l.Close()
	}
	if overlaps.Load() != 0 || store.Rejected() != 0 {
		t.Errorf("mutual exclusion broken across a leader failover: %d overlaps, %d stale tokens", overlaps.Load(), store.Rejected())
	}
	t.Logf("%d acquisitions, %d after the kill, %d errors while the cluster elected a leader",
		store.Accepted(), afterKill.Load(), errs.Load())
	goleak.VerifyNone(t, append(padlocktest.LeakIgnores(), ignore)...)
}

func leaderOf(t *testing.T, ctx context.Context, c *padlocktest.Server) *padlocktest.Node {
	t.Helper()
	for _, m := range c.Nodes() {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.Addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		st, err := cli.Status(ctx, m.Addr)
		cli.Close()
		if err != nil {
			t.Fatal(err)
		}
		if st.Leader == st.Header.MemberId {
			return m
		}
	}
	t.Fatal("no leader")
	return nil
}

// Holds on one Locker share its session lease, and their renewals are
// coalesced: 100 held names must cost the server about one keep-alive per
// renewal period, not one per hold. Counted on the server, from its
// etcd_debugging_lease_renewed_total metric.
func TestRenewalsCoalesced(t *testing.T) {
	h, ctx := etcdTest(t)
	const n = 100
	ttl := h.TTL()
	a := open(t, h, ctx, padlock.WithTTL(ttl))
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

// leaseRenewals reads the server's count of lease keep-alives.
func leaseRenewals(t *testing.T, ctx context.Context) int {
	return int(metric(t, ctx, server.Nodes()[0].Addr, "etcd_debugging_lease_renewed_total "))
}

// metric sums the values of the server's metrics lines that begin with
// prefix (a name, with its labels' opening brace or a space) and contain
// every one of labels.
func metric(t *testing.T, ctx context.Context, addr, prefix string, labels ...string) float64 {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/metrics", nil)
	req.Close = true // leave no idle connection (and its goroutines) behind
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	found := false
	var sum float64
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok || !containsAll(line, labels) {
			continue
		}
		f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatal(err)
		}
		sum += f
		found = true
	}
	if !found {
		t.Fatalf("%s not in the server's metrics", prefix)
	}
	return sum
}

// The session's keeper keeps a waiter's queue key alive for as long as it
// waits, with no hold on that Locker to renew anything, and an idle Locker
// sends no keep-alives at all.
func TestKeeperKeepsWaitersAndIdlesQuietly(t *testing.T) {
	h, ctx := etcdTest(t)
	ttl := h.TTL()
	a := open(t, h, ctx, padlock.WithTTL(ttl))
	b := open(t, h, ctx, padlock.WithTTL(ttl))
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

// waitKeys waits until the harness's prefix holds n keys.
func waitKeys(t *testing.T, ctx context.Context, h *harness, n int) {
	t.Helper()
	conformance.WaitState(ctx, t, h, fmt.Sprintf("%d keys", n), 30*time.Second, func(s []string) bool { return len(s) == n })
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
