package etcd_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/tests/benchutil"
)

// Compare padlock's etcd backend with etcd's own concurrency.Mutex in one
// run, on one server: go test -run '^$' -bench . ./tests/etcd
//
// Uncontended measures one Lock+Unlock; Handoff has two clients contend
// for one name, holding it 1ms each, and reports the hand-off latency: how
// long the lock sits free between one release and the other's acquisition.
func BenchmarkUncontended(b *testing.B) {
	ctx := context.Background()
	b.Run("padlock", func(b *testing.B) {
		l := benchLocker(b)
		for b.Loop() {
			lk, err := l.Lock(ctx, "bench/u")
			if err != nil {
				b.Fatal(err)
			}
			lk.Unlock(ctx)
		}
	})
	b.Run("concurrency.Mutex", func(b *testing.B) {
		m := benchMutex(b, "/bench-native/u")
		for b.Loop() {
			if err := m.Lock(ctx); err != nil {
				b.Fatal(err)
			}
			m.Unlock(ctx)
		}
	})
}

func BenchmarkHandoff(b *testing.B) {
	ctx := context.Background()
	b.Run("padlock", func(b *testing.B) {
		ls := []*padlock.Locker{benchLocker(b), benchLocker(b)}
		benchutil.Contend(b, 2, time.Millisecond, func(i int) (func() error, error) {
			lk, err := ls[i].Lock(ctx, "bench/h")
			if err != nil {
				return nil, err
			}
			return func() error { return lk.Unlock(ctx) }, nil
		})
	})
	b.Run("concurrency.Mutex", func(b *testing.B) {
		ms := []*concurrency.Mutex{benchMutex(b, "/bench-native/h"), benchMutex(b, "/bench-native/h")}
		benchutil.Contend(b, 2, time.Millisecond, func(i int) (func() error, error) {
			if err := ms[i].Lock(ctx); err != nil {
				return nil, err
			}
			return func() error { return ms[i].Unlock(ctx) }, nil
		})
	})
}

func benchLocker(b *testing.B) *padlock.Locker {
	return benchutil.Open(b, "etcd://"+server.Nodes[0].ClientAddr+"/bench")
}

func benchMutex(b *testing.B, pfx string) *concurrency.Mutex {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{server.Nodes[0].ClientAddr},
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(); cli.Close() })
	return concurrency.NewMutex(s, pfx)
}
