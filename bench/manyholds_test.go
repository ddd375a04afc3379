package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/padlocktest"
)

// BenchmarkManyHolds is one Locker holding many names at once, on every
// backend: n names taken with a TTL of 3s and held for three TTLs, as
// issue 27's "many holds on one Locker" row asks. It reports what keeping
// them costs while nothing else happens, over the last two TTLs (the
// first renewals are past):
//
//   - cpu-µs/hold/s: this process's CPU time (user and system) per hold
//     and second: the renewal loop, the driver's renewals, the telemetry;
//   - net-cpu-µs/hold/s: the same for every hold but the first, less
//     what the process spends over the same window with a Locker holding
//     one name (base-cpu-ms/s, in milliseconds per second): what each
//     hold adds, which the targets are about (at 1,000 holds the base is
//     most of the first);
//   - server-cpu-µs/hold/s: the same for the server processes, where
//     they run on this machine;
//   - heap-B/hold: the live heap per hold after a garbage collection;
//   - lost: holds whose Done closed (a full run fails on any).
//
// It runs at 1,000 and 20,000 holds, to show whether the cost per hold is
// flat, and fails where a hold adds more than its target
// (ManyHoldsTarget); with -short (scripts/test runs every benchmark once that way) at
// 100 holds for one TTL after the first renewal, only to prove it runs.
//
//	go test ./bench -run '^$' -bench ManyHolds -benchtime 1x
func BenchmarkManyHolds(b *testing.B) {
	sizes, ttl, window := []int{1000, 20000}, 3*time.Second, 15*time.Second
	if testing.Short() {
		sizes, window = []int{100}, ttl
	}
	for _, kind := range LocalKinds {
		b.Run(string(kind), func(b *testing.B) {
			srv := padlocktest.Start(b, kind)
			base := baseCPU(b, srv, ttl, window)
			for _, n := range sizes {
				b.Run("holds="+strconv.Itoa(n), func(b *testing.B) {
					var cpu, server time.Duration
					var heap, lost int64
					serverKnown := true
					for i := range b.N {
						m := holdMany(b, srv, fmt.Sprintf("many/%d/%d/", n, i), n, ttl, window)
						cpu += m.cpu
						server += m.server
						serverKnown = serverKnown && m.serverKnown
						heap += m.heap
						lost += m.lost
					}
					per := float64(b.N) * float64(n) * window.Seconds()
					metrics := []struct {
						v    float64
						unit string
					}{
						{float64(cpu.Nanoseconds()) / 1e3 / per, "cpu-µs/hold/s"},
						{float64((cpu - time.Duration(b.N)*base).Nanoseconds()) / 1e3 / (float64(b.N) * float64(n-1) * window.Seconds()), "net-cpu-µs/hold/s"},
						{float64(base.Nanoseconds()) / 1e6 / window.Seconds(), "base-cpu-ms/s"},
						{float64(server.Nanoseconds()) / 1e3 / per, "server-cpu-µs/hold/s"},
						{float64(heap) / float64(b.N) / float64(n), "heap-B/hold"},
						{float64(lost) / float64(b.N), "lost"},
					}
					var all []string
					for _, m := range metrics {
						if m.unit != "server-cpu-µs/hold/s" || serverKnown {
							b.ReportMetric(m.v, m.unit)
							all = append(all, fmt.Sprintf("%.4g %s", m.v, m.unit))
						}
					}
					if testing.Short() {
						return
					}
					// A failed benchmark prints no result line: its numbers
					// are in the message.
					if lost > 0 {
						b.Errorf("%d of %d holds lost while held (%s)", lost, n, strings.Join(all, ", "))
					}
					if net, target := metrics[1].v, ManyHoldsTarget(string(kind)); net > target {
						b.Errorf("each hold adds %.2f µs of CPU per second; the target is at most %v (%s)", net, target, strings.Join(all, ", "))
					}
				})
			}
		})
	}
}

// baseCPU is this process's CPU time over window with an open Locker
// that holds one name, its first renewals past: what a Locker's session
// costs whatever it holds (the runtime, the client library's pings and
// timers, a keep-alive, a ZooKeeper session's proof, the renewal loop's
// wake-ups), which BenchmarkManyHolds subtracts for its net cost per hold.
func baseCPU(b *testing.B, srv *padlocktest.Server, ttl, window time.Duration) time.Duration {
	ctx := context.Background()
	l, err := padlock.Open(ctx, srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	lk, err := l.Lock(ctx, "many/base", padlock.WithTTL(ttl))
	if err != nil {
		b.Fatal(err)
	}
	defer lk.Unlock(ctx)
	time.Sleep(ttl) // past the first renewals, as holdMany
	runtime.GC()
	c0 := clientCPU()
	time.Sleep(window) // the measurement: one name held, nothing asked
	return clientCPU() - c0
}

// manyHolds is one measurement of BenchmarkManyHolds.
type manyHolds struct {
	cpu, server time.Duration
	serverKnown bool
	heap, lost  int64
}

// holdMany takes n names under prefix on a new Locker, waits out the first
// renewal period, measures the window, and releases them.
func holdMany(b *testing.B, srv *padlocktest.Server, prefix string, n int, ttl, window time.Duration) manyHolds {
	b.StopTimer()
	ctx := context.Background()
	l, err := padlock.Open(ctx, srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	held := make([]*padlock.Lock, n)
	heap0 := liveHeap()
	var g errgroup.Group
	g.SetLimit(32)
	for i := range n {
		g.Go(func() (err error) {
			held[i], err = l.Lock(ctx, prefix+strconv.Itoa(i), padlock.WithTTL(ttl))
			return err
		})
	}
	err = g.Wait()
	defer func() {
		for _, lk := range held {
			if lk != nil {
				lk.Unlock(ctx)
			}
		}
	}()
	if err != nil {
		b.Fatal(err)
	}
	var m manyHolds
	m.heap = int64(liveHeap()) - int64(heap0)
	time.Sleep(ttl) // past every hold's first renewals: the window is the last two TTLs of three
	pids := serverPIDs(strings.Split(srv.Addrs(), ","))
	m.serverKnown = len(pids) > 0
	stopProfile := profileWindow(b, prefix)
	s0 := serversCPU(pids) // sweeps /proc: before the client's reading
	c0 := clientCPU()
	b.StartTimer()
	time.Sleep(window) // the measurement: holds kept, nothing else asked
	b.StopTimer()
	stopProfile()
	m.cpu, m.server = clientCPU()-c0, serversCPU(pids)-s0
	for _, lk := range held {
		select {
		case <-lk.Done():
			m.lost++
		default:
		}
	}
	return m
}

// profileWindow starts a CPU profile of the measurement window when
// PADLOCK_MANYHOLDS_PROFILE names a directory (one file per cell, named by
// the cell's prefix), so that a profile shows the renewals alone, not the
// acquisitions and releases around them; it returns the function that
// stops it.
func profileWindow(b *testing.B, prefix string) (stop func()) {
	dir := os.Getenv("PADLOCK_MANYHOLDS_PROFILE")
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, strings.NewReplacer("/", "-").Replace(b.Name()+"-"+prefix)+"cpu.pprof"))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

// liveHeap is the heap in use after a garbage collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
