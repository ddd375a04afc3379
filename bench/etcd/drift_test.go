package etcd_test

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkHotNameDrift reproduces the hot-path issue's "no slowdown over
// time" row: eight workers on eight clients take one name in a closed loop
// for PADLOCK_DRIFT_DURATION (default 60s), and the benchmark reports the
// throughput of the first and the last sixth of the run and their ratio
// (1.0: no slowdown). etcd keeps every deleted key's revisions until
// compaction, and a prefix range over the name walks them:
//
//	go test -run '^$' -bench HotNameDrift -benchtime 1x ./bench/etcd
//
// b.N is ignored: the run is bounded by time, once. With -short
// (scripts/test runs every benchmark once that way, beside the tests) it
// runs 3s, only to prove it runs: a minute per implementation of eight
// workers in a closed loop kept both cores busy for two minutes of the
// suite.
func BenchmarkHotNameDrift(b *testing.B) {
	run := time.Minute
	if testing.Short() {
		run = 3 * time.Second
	}
	if v := os.Getenv("PADLOCK_DRIFT_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		run = d
	}
	type lockFn func(ctx context.Context) (unlock func(), err error)
	drift := func(b *testing.B, clients []lockFn) {
		ctx, cancel := context.WithTimeout(context.Background(), run)
		defer cancel()
		window := run / 6
		var first, last atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		for _, lock := range clients {
			wg.Go(func() {
				for ctx.Err() == nil {
					unlock, err := lock(ctx)
					if err != nil {
						if ctx.Err() == nil {
							b.Error(err)
						}
						return
					}
					unlock()
					switch at := time.Since(start); {
					case at < window:
						first.Add(1)
					case at >= run-window && at < run:
						last.Add(1)
					}
				}
			})
		}
		wg.Wait()
		b.ReportMetric(float64(first.Load())/window.Seconds(), "first-acq/s")
		b.ReportMetric(float64(last.Load())/window.Seconds(), "last-acq/s")
		if first.Load() > 0 {
			b.ReportMetric(float64(last.Load())/float64(first.Load()), "last/first")
		}
	}
	const workers = 8
	b.Run("padlock", func(b *testing.B) {
		var clients []lockFn
		for range workers {
			l := benchLocker(b)
			clients = append(clients, func(ctx context.Context) (func(), error) {
				lk, err := l.Lock(ctx, "bench/drift")
				if err != nil {
					return nil, err
				}
				return func() { lk.Unlock(context.WithoutCancel(ctx)) }, nil
			})
		}
		drift(b, clients)
	})
	b.Run("concurrency.Mutex", func(b *testing.B) {
		var clients []lockFn
		for range workers {
			m := benchMutex(b, "/bench-native/drift")
			clients = append(clients, func(ctx context.Context) (func(), error) {
				if err := m.Lock(ctx); err != nil {
					return nil, err
				}
				return func() { m.Unlock(context.WithoutCancel(ctx)) }, nil
			})
		}
		drift(b, clients)
	})
}
