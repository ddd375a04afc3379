package etcd_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/bench/benchutil"
	_ "github.com/padlock-go/padlock/etcd"
	"github.com/padlock-go/padlock/padlocktest"
)

// BenchmarkUncontendedSideBySide is the hot-path issue's uncontended row:
// padlock, concurrency.Mutex, the floor (a bare Put and Delete of one key)
// and padlock's own two requests sent bare (its floor) take turns, cycle
// by cycle, on one server.
func BenchmarkUncontendedSideBySide(b *testing.B) {
	ctx := context.Background()
	l := benchLocker(b)
	m := benchMutex(b, "/bench-native/sbs")
	cli := benchClient(b)
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Revoke(context.WithoutCancel(ctx), lease.ID)
	benchutil.SideBySide(b,
		benchutil.Variant{Name: "padlock", Op: benchutil.Cycle(ctx, l, "bench/sbs")},
		benchutil.Variant{Name: "mutex", Op: func() error {
			if err := m.Lock(ctx); err != nil {
				return err
			}
			return m.Unlock(ctx)
		}},
		benchutil.Variant{Name: "put+delete", Op: func() error {
			if _, err := cli.Put(ctx, "/bench-floor/sbs", ""); err != nil {
				return err
			}
			_, err := cli.Delete(ctx, "/bench-floor/sbs")
			return err
		}},
		// padlock's two requests, bare: the guarded put on a lease with
		// its count, and the delete guarded by create revision.
		benchutil.Variant{Name: "guarded-txns", Op: func() error {
			const key = "/bench-floor/sbs-txn/k"
			resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
				Then(clientv3.OpPut(key, "", clientv3.WithLease(lease.ID)), clientv3.OpGet("/bench-floor/sbs-txn/", clientv3.WithPrefix(), clientv3.WithCountOnly())).
				Commit()
			if err != nil {
				return err
			}
			_, err = cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", resp.Header.Revision)).
				Then(clientv3.OpDelete(key)).Commit()
			return err
		}},
	)
}

// BenchmarkAcquireOverDeadKeys is the hot-path issue's dead-key row: one
// uncontended Lock+Unlock on a name under which n keys were created and
// deleted (etcd keeps them in its index until compaction, and a range over
// the name walks them). padlock no longer leaves such keys itself (its key
// slots are reused), but other clients' history can: this is what they
// cost, to padlock and to concurrency.Mutex alike.
func BenchmarkAcquireOverDeadKeys(b *testing.B) {
	ctx := context.Background()
	cli := benchClient(b)
	bury := func(b *testing.B, pfx string, n int) {
		for i := 0; i < n; i += 128 { // etcd's default limit of operations per Txn
			var ops []clientv3.Op
			for j := i; j < min(i+128, n); j++ {
				ops = append(ops, clientv3.OpPut(fmt.Sprintf("%sdead-%06d", pfx, j), ""))
			}
			if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := cli.Delete(ctx, pfx, clientv3.WithPrefix()); err != nil {
			b.Fatal(err)
		}
	}
	for _, n := range []int{0, 1000, 3000, 10000} {
		b.Run(fmt.Sprintf("dead=%d", n), func(b *testing.B) {
			name := fmt.Sprintf("dead%d-%d", n, time.Now().UnixNano())
			bury(b, "/bench/"+name+"/", n)
			bury(b, "/bench-native/"+name+"/", n)
			l := benchLocker(b)
			m := benchMutex(b, "/bench-native/"+name)
			benchutil.SideBySide(b,
				benchutil.Variant{Name: "padlock", Op: benchutil.Cycle(ctx, l, name)},
				benchutil.Variant{Name: "mutex", Op: func() error {
					if err := m.Lock(ctx); err != nil {
						return err
					}
					return m.Unlock(ctx)
				}},
			)
		})
	}
}

// BenchmarkUncontendedAfterContention is the uncontended cycle on a name
// that eight Lockers contended for a moment before, against the same
// Locker's cycle on a name nobody else ever used, cycle by cycle. The other
// seven Lockers stay open and idle. A Locker that kept watching a name
// after its last waiter left would make every put and delete of the
// cycle fan out to it: the ratio "speed-vs-fresh" (near 1 when idle
// watches end once the name is free) shows what such watches cost.
func BenchmarkUncontendedAfterContention(b *testing.B) {
	ctx := context.Background()
	ls := make([]*padlock.Locker, 8)
	for i := range ls {
		ls[i] = benchLocker(b)
	}
	name := fmt.Sprintf("after-%d", time.Now().UnixNano())
	var g errgroup.Group
	for _, l := range ls {
		g.Go(func() error {
			for range 20 {
				if err := benchutil.Cycle(ctx, l, name)(); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	benchutil.SideBySide(b,
		benchutil.Variant{Name: "after", Op: benchutil.Cycle(ctx, ls[0], name)},
		benchutil.Variant{Name: "fresh", Op: benchutil.Cycle(ctx, ls[0], name+"-fresh")},
	)
}

// BenchmarkContended is the hot-path issue's contended row: eight clients,
// each holding the lock 1ms and thinking 1ms between acquisitions. It
// reports the hand-off, the 99th percentile wait and the utilisation.
func BenchmarkContended(b *testing.B) {
	ctx := context.Background()
	load := benchutil.Load{Clients: 8, Hold: time.Millisecond, Think: time.Millisecond}
	b.Run("padlock", func(b *testing.B) {
		var ls []*padlock.Locker
		for range load.Clients {
			ls = append(ls, benchLocker(b))
		}
		benchutil.ContendLoad(b, load, func(i int) (func() error, error) {
			lk, err := ls[i].Lock(ctx, "bench/c")
			if err != nil {
				return nil, err
			}
			return func() error { return lk.Unlock(ctx) }, nil
		})
	})
	b.Run("concurrency.Mutex", func(b *testing.B) {
		var ms []*concurrency.Mutex
		for range load.Clients {
			ms = append(ms, benchMutex(b, "/bench-native/c"))
		}
		benchutil.ContendLoad(b, load, func(i int) (func() error, error) {
			if err := ms[i].Lock(ctx); err != nil {
				return nil, err
			}
			return func() error { return ms[i].Unlock(ctx) }, nil
		})
	})
}

func benchLocker(b *testing.B) *padlock.Locker {
	return benchutil.Open(b, "etcd://"+etcdAddr(b)+"/bench")
}

func benchMutex(b *testing.B, pfx string) *concurrency.Mutex {
	s, err := concurrency.NewSession(benchClient(b), concurrency.WithTTL(10))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return concurrency.NewMutex(s, pfx)
}

// benchClient returns a client of its own, closed when the benchmark ends.
func benchClient(b *testing.B) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdAddr(b)},
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cli.Close() })
	return cli
}

// etcdAddr is the address of the package's one-member etcd server.
func etcdAddr(b *testing.B) string {
	return benchutil.Server(b, "etcd", padlocktest.Etcd, padlocktest.Nodes(1)).Nodes()[0].Addr
}
