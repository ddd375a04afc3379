package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/padlocktest"
)

// BenchmarkManyHolds is one Locker holding many names at once, on every
// backend: n names taken with a TTL of 3s and held past their first
// renewals, as issue 27's "many holds on one Locker" row asks. It reports
// what keeping them costs while nothing else happens:
//
//   - cpu-µs/hold/s: this process's CPU time (user and system) per hold
//     and second while the Locker holds n names: the renewal loop, the
//     driver's renewals, the telemetry;
//   - net-cpu-µs/hold/s: what each hold adds, which the targets are about:
//     the same CPU time less what the process spends while the same
//     Locker holds one name (base-cpu-ms/s, in milliseconds per second:
//     its session's pings, keep-alive and proof, the loop's wake-ups),
//     divided by the other n − 1 holds;
//   - net-lo-µs/hold/s and net-hi-µs/hold/s: the least and the most of
//     the rounds' net costs (below), the spread the median is read from;
//   - server-cpu-µs/hold/s: the server processes' CPU time per hold and
//     second, where they run on this machine;
//   - heap-B/hold: the live heap per hold after a garbage collection;
//   - lost: holds whose Done closed (a full run fails on any).
//
// The base moves by milliseconds a second from one window to the next
// (garbage collection, the runtime's and the client library's timers),
// which at 1,000 holds is several µs per hold: one base window against
// one window of holds could not tell a target of 1 µs from noise. So the
// windows alternate on one Locker that keeps its one name throughout:
// base, n holds, base, n holds, ..., base, each window after a garbage
// collection and a TTL's wait (past the renewals of what was just taken
// or released), and each round's net cost is its window of n holds
// against the mean of the base windows on either side of it. The metrics
// are the rounds' medians.
//
// It runs at 1,000 and 20,000 holds, to show whether the cost per hold is
// flat, and fails where a hold adds more than its target
// (ManyHoldsTarget); with -short (scripts/test runs every benchmark once
// that way) at 100 holds for one round of one TTL, only to prove it runs.
//
//	go test ./bench -run '^$' -bench ManyHolds -benchtime 1x
func BenchmarkManyHolds(b *testing.B) {
	sizes, ttl, window, rounds := []int{1000, 20000}, 3*time.Second, 10*time.Second, 3
	if testing.Short() {
		sizes, window, rounds = []int{100}, ttl, 1
	}
	for _, kind := range LocalKinds {
		b.Run(string(kind), func(b *testing.B) {
			srv := padlocktest.Start(b, kind)
			for _, n := range sizes {
				b.Run("holds="+strconv.Itoa(n), func(b *testing.B) {
					var all manyRounds
					for i := range b.N {
						all.add(holdMany(b, srv, fmt.Sprintf("many/%d/%d/", n, i), n, ttl, window, rounds))
					}
					per, w := float64(n)*window.Seconds(), window.Seconds()
					net := all.net(n, window)
					metrics := []struct {
						v    float64
						unit string
					}{
						{median(all.cpu) / 1e3 / per, "cpu-µs/hold/s"},
						{median(net), "net-cpu-µs/hold/s"},
						{slices.Min(net), "net-lo-µs/hold/s"},
						{slices.Max(net), "net-hi-µs/hold/s"},
						{median(all.allBases()) / 1e6 / w, "base-cpu-ms/s"},
						{median(all.server) / 1e3 / per, "server-cpu-µs/hold/s"},
						{median(all.heap) / float64(n-1), "heap-B/hold"},
						{float64(all.lost) / float64(b.N), "lost"},
					}
					var shown []string
					for _, m := range metrics {
						if m.unit != "server-cpu-µs/hold/s" || all.serverKnown {
							b.ReportMetric(m.v, m.unit)
							shown = append(shown, fmt.Sprintf("%.4g %s", m.v, m.unit))
						}
					}
					if testing.Short() {
						return
					}
					// A failed benchmark prints no result line: its numbers
					// are in the message.
					if all.lost > 0 {
						b.Errorf("%d of %d holds lost while held (%s)", all.lost, n, strings.Join(shown, ", "))
					}
					if v, target := metrics[1].v, ManyHoldsTarget(string(kind)); v > target {
						b.Errorf("each hold adds %.2f µs of CPU per second; the target is at most %v (%s)", v, target, strings.Join(shown, ", "))
					}
				})
			}
		})
	}
}

// manyRounds is what holdMany measured, over every b.N: per round of n
// holds, the window's CPU (cpu, server: nanoseconds) and the heap they
// took; per Locker, the base windows around its rounds (base), rounds+1
// of them, one before each round and one after the last.
type manyRounds struct {
	cpu, server, heap []float64
	base              [][]float64
	serverKnown       bool
	lost              int
}

func (r *manyRounds) add(m manyRounds) {
	r.cpu = append(r.cpu, m.cpu...)
	r.server = append(r.server, m.server...)
	r.heap = append(r.heap, m.heap...)
	r.base = append(r.base, m.base...)
	r.serverKnown = m.serverKnown
	r.lost += m.lost
}

// net is each round's CPU per hold and second beyond the base, in µs:
// its window against the mean of the base windows before and after it,
// spread over the n − 1 holds beyond the base's one.
func (r *manyRounds) net(n int, window time.Duration) []float64 {
	var out []float64
	i := 0
	for _, bases := range r.base {
		for j := 0; j+1 < len(bases); j++ {
			base := (bases[j] + bases[j+1]) / 2
			out = append(out, (r.cpu[i]-base)/1e3/(float64(n-1)*window.Seconds()))
			i++
		}
	}
	return out
}

// allBases is every base window of r.
func (r *manyRounds) allBases() []float64 { return slices.Concat(r.base...) }

// holdMany opens a Locker that takes one name and keeps it, and measures
// rounds rounds on it: a base window with that one name, then the other
// n − 1 names taken, a window, and those released; and a last base window
// after the last round. Every window comes after a garbage collection and
// a TTL's wait: past every new hold's first renewals, or past the last
// renewals of those just released.
func holdMany(b *testing.B, srv *padlocktest.Server, prefix string, n int, ttl, window time.Duration, rounds int) manyRounds {
	b.StopTimer()
	ctx := context.Background()
	l, err := padlock.Open(ctx, srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	anchor, err := l.Lock(ctx, prefix+"base", padlock.WithTTL(ttl))
	if err != nil {
		b.Fatal(err)
	}
	defer anchor.Unlock(ctx)
	pids := serverPIDs(strings.Split(srv.Addrs(), ","))
	m := manyRounds{serverKnown: len(pids) > 0}
	bases := []float64{baseWindow(ttl, window)}
	for r := range rounds {
		cpu, server, heap, lost := roundOfMany(b, l, pids, fmt.Sprintf("%s%d/", prefix, r), n-1, ttl, window)
		m.cpu, m.server, m.heap = append(m.cpu, cpu), append(m.server, server), append(m.heap, heap)
		m.lost += lost
		bases = append(bases, baseWindow(ttl, window))
	}
	m.base = [][]float64{bases}
	select {
	case <-anchor.Done():
		m.lost++
	default:
	}
	return m
}

// baseWindow is this process's CPU time (ns) over window, after a garbage
// collection and a TTL's wait, while the Locker holds its one name.
func baseWindow(ttl, window time.Duration) float64 {
	runtime.GC()
	time.Sleep(ttl)
	c0 := clientCPU()
	time.Sleep(window)
	return float64(clientCPU() - c0)
}

// roundOfMany takes k names under prefix on l, waits out their first
// renewals, measures a window (this process's and the servers' CPU time,
// ns), counts the holds lost meanwhile, and releases them; heap is the
// live heap they added.
func roundOfMany(b *testing.B, l *padlock.Locker, pids []int, prefix string, k int, ttl, window time.Duration) (cpu, server, heap float64, lost int) {
	ctx := context.Background()
	held := make([]*padlock.Lock, k)
	heap0 := liveHeap()
	var g errgroup.Group
	g.SetLimit(32)
	for i := range k {
		g.Go(func() (err error) {
			held[i], err = l.Lock(ctx, prefix+strconv.Itoa(i), padlock.WithTTL(ttl))
			return err
		})
	}
	err := g.Wait()
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
	heap = float64(int64(liveHeap()) - int64(heap0)) // after a collection, as each window
	time.Sleep(ttl)                                  // past every hold's first renewals
	stopProfile := profileWindow(b, prefix)
	s0 := serversCPU(pids) // sweeps /proc: before the client's reading
	c0 := clientCPU()
	b.StartTimer()
	time.Sleep(window) // the measurement: holds kept, nothing else asked
	b.StopTimer()
	stopProfile()
	cpu, server = float64(clientCPU()-c0), float64(serversCPU(pids)-s0)
	for _, lk := range held {
		select {
		case <-lk.Done():
			lost++
		default:
		}
	}
	return cpu, server, heap, lost
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
