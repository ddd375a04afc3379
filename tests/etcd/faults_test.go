package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// A waiter whose watch resumes from a compacted revision must re-read the
// queue and still acquire when the holder releases.
func TestWaiterSurvivesCompaction(t *testing.T) {
	h, ctx := etcdTest(t)
	a := conformance.NewLocker(ctx, t, h, padlock.WithTTL(5*time.Second))
	// The waiter's log shows that its watch did end on the compaction
	// (and was not, say, restarted for another reason before it).
	logs := &recorder{}
	b := conformance.NewLocker(ctx, t, h, padlock.WithTTL(5*time.Second), padlock.WithLogger(slog.New(logs)))
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
	padlocktest.WaitFor(t, "waiter queued and watching", time.Minute, func() bool {
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

// Unlock deletes only the key it created: if the key was deleted and
// re-created meanwhile (a newer hold), the stale Unlock must not touch it.
func TestUnlockGuardedByCreateRevision(t *testing.T) {
	h, ctx := etcdTest(t)
	a := conformance.NewLocker(ctx, t, h)
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
	a, b := conformance.NewLocker(ctx, t, h), conformance.NewLocker(ctx, t, h)
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
	padlocktest.WaitFor(t, "load running", time.Minute, func() bool { return store.Accepted() > 50 })
	leader := leaderOf(t, ctx, cluster)
	t.Logf("killing leader %s", leader.Addr)
	leader.Kill()
	killed.Store(true)
	padlocktest.WaitFor(t, "locking after the failover", time.Minute, func() bool { return afterKill.Load() > 50 })
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
