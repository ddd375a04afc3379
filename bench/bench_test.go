package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlock-go/padlock/padlocktest"
)

func TestMain(m *testing.M) {
	padlocktest.Main(m, func(context.Context) (func(), error) {
		// The benchmarks' servers start on first use and stop here.
		return func() {
			benchGroups.Range(func(_, v any) bool {
				v.(*benchServer).close()
				return true
			})
		}, nil
	})
}

// startGroup starts a server of kind for t and opens its group.
func startGroup(tb testing.TB, kind padlocktest.Kind) *Group {
	tb.Helper()
	srv := padlocktest.Start(tb, kind)
	g, err := Open(context.Background(), srv.URL())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { g.Close() })
	return g
}

// TestRunEveryBackend runs U1 and a contended C1 cell on every backend:
// every implementation completes acquisitions, mutual exclusion and token
// order hold (Run fails otherwise), nothing is left on the servers, and
// the round trips counted are at least the protocol's minimum.
func TestRunEveryBackend(t *testing.T) {
	for _, kind := range append(slices.Clone(LocalKinds), ExtraKinds...) {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			g := startGroup(t, kind)
			m := DefaultMatrix()
			m.C1Waiters, m.C1Holds, m.C1Thinks = []int{3}, []time.Duration{time.Millisecond}, []time.Duration{0}
			rep, err := Run(context.Background(), Config{Groups: []*Group{g}, Workloads: []string{U1, C1}, Matrix: m,
				Duration: 300 * time.Millisecond, Rounds: 1})
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, r := range rep.Results {
				seen[r.Impl] = true
				if r.Acquisitions == 0 {
					t.Errorf("%s %s: no acquisitions", r.Cell, r.Impl)
				}
				if im, _ := g.Impl(r.Impl); r.GaveUp > 0 && !im.GivesUp {
					t.Errorf("%s %s: %d acquisitions given up", r.Cell, r.Impl, r.GaveUp)
				}
				if r.Acquisitions > 0 && r.RTPerAcq < float64(r.MinRT) {
					t.Errorf("%s %s: %.2f round trips per acquisition counted, below the minimum %d: the counter misses requests", r.Cell, r.Impl, r.RTPerAcq, r.MinRT)
				}
				// Utilisation counts the window only: on a loaded machine
				// every grant may come after it, and then there is nothing
				// to hold it to. A grant inside it must show.
				if r.Workload == C1 && (r.PerSecond > 0) != (r.Utilisation > 0) || r.Utilisation > 1 {
					t.Errorf("%s %s: utilisation %v with %v acquisitions/s in the window", r.Cell, r.Impl, r.Utilisation, r.PerSecond)
				}
			}
			for _, im := range g.Impls {
				// The recipe peers run R1, S1 and E1 only (TestRecipesEtcd).
				if !seen[im.Name] && !im.OnlyRecipes {
					t.Errorf("%s did not run", im.Name)
				}
			}
			if len(rep.Ratios) == 0 {
				t.Error("no ratios")
			}
		})
	}
}

// brokenGroup is a group whose "lock" grants every request at once: the
// benchmark must refuse its results. Each Lock waits until two clients
// are inside, so that they overlap whatever the scheduler does.
func brokenGroup(tokens func(i int64) uint64) *Group {
	var (
		mu      sync.Mutex
		waiting chan struct{} // the first of a pair, waiting for the second
		n       atomic.Int64
	)
	return &Group{Backend: "broken", Leftover: func(context.Context, string) (int, error) { return 0, nil }, Close: func() error { return nil },
		Impls: []Impl{{Name: "no-lock", Role: RolePadlock, Waits: true, Tokens: true, New: func(context.Context, *Counter, string) (Client, error) {
			return funcClient{lock: func(ctx context.Context, name string) (Held, error) {
				if strings.HasPrefix(name, "warm-up-") {
					return Held{Release: func(context.Context) error { return nil }}, nil
				}
				// Granted in pairs: each call waits for another to grant both
				// at once. The waiting warm-up's holder asks alone, and goes
				// on after a while without a partner.
				mu.Lock()
				if ch := waiting; ch != nil {
					waiting = nil
					close(ch)
					mu.Unlock()
				} else {
					ch = make(chan struct{})
					waiting = ch
					mu.Unlock()
					t := time.NewTimer(50 * time.Millisecond)
					select {
					case <-ch:
					case <-t.C:
						mu.Lock()
						if waiting == ch {
							waiting = nil
						}
						mu.Unlock()
					}
					t.Stop()
				}
				return Held{Token: tokens(n.Add(1)), Release: func(context.Context) error { return nil }}, nil
			}, close: func() error { return nil }}, nil
		}}}}
}

func TestRunRefusesViolations(t *testing.T) {
	m := DefaultMatrix()
	m.C1Waiters, m.C1Holds, m.C1Thinks = []int{2}, []time.Duration{time.Millisecond}, []time.Duration{0}
	cfg := Config{Workloads: []string{C1}, Matrix: m, Duration: 100 * time.Millisecond, Rounds: 1}
	t.Run("exclusion", func(t *testing.T) {
		// Without tokens: only the holder check can catch it.
		cfg.Groups = []*Group{brokenGroup(func(i int64) uint64 { return uint64(i) })}
		cfg.Groups[0].Impls[0].Tokens = false
		if _, err := Run(context.Background(), cfg); !errors.Is(err, ErrViolation) {
			t.Fatalf("Run = %v, want ErrViolation", err)
		}
	})
	t.Run("tokens", func(t *testing.T) {
		// One client: no overlap, but its tokens go down.
		m := m
		m.C1Waiters = []int{1}
		cfg := cfg
		cfg.Matrix = m
		cfg.Groups = []*Group{soloGroup(func(i int64) uint64 { return uint64(1000 - i) })}
		if _, err := Run(context.Background(), cfg); !errors.Is(err, ErrViolation) {
			t.Fatalf("Run = %v, want ErrViolation", err)
		}
	})
	t.Run("stuck", func(t *testing.T) {
		// A waiter that never gets the lock fails the turn when the grace
		// ends, and is let go by Close.
		defer func(g time.Duration) { minGrace = g }(minGrace)
		minGrace = time.Second
		g := soloGroup(func(i int64) uint64 { return uint64(i) })
		g.Impls[0].New = func(context.Context, *Counter, string) (Client, error) {
			closed := make(chan struct{})
			var once sync.Once
			n := 0
			return funcClient{lock: func(ctx context.Context, name string) (Held, error) {
				if n++; n > 1 { // the warm-up gets it, then nobody does
					<-closed
					return Held{}, errors.New("closed")
				}
				return Held{Token: 1, Release: func(context.Context) error { return nil }}, nil
			}, close: func() error { once.Do(func() { close(closed) }); return nil }}, nil
		}
		cfg := cfg
		cfg.Groups = []*Group{g}
		m := m
		m.C1Waiters = []int{1}
		cfg.Matrix = m
		if _, err := Run(context.Background(), cfg); !errors.Is(err, errStuck) {
			t.Fatalf("Run = %v, want errStuck", err)
		}
	})
}

// soloGroup is a group of one client whose tokens are tokens(n) for its
// nth acquisition.
func soloGroup(tokens func(i int64) uint64) *Group {
	var n atomic.Int64
	return &Group{Backend: "solo", Leftover: func(context.Context, string) (int, error) { return 0, nil }, Close: func() error { return nil },
		Impls: []Impl{{Name: "solo", Role: RolePadlock, Waits: true, Tokens: true, New: func(context.Context, *Counter, string) (Client, error) {
			return funcClient{lock: func(ctx context.Context, name string) (Held, error) {
				return Held{Token: tokens(n.Add(1)), Release: func(context.Context) error { return nil }}, nil
			}, close: func() error { return nil }}, nil
		}}}}
}

func TestRunRefusesBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Duration: 0, Rounds: 1},
		{Duration: time.Second, Rounds: 0},
		{Duration: time.Second, Rounds: 1, Workloads: []string{"U9"}},
	} {
		if _, err := Run(context.Background(), cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("Run(%+v) = %v, want ErrInvalid", cfg, err)
		}
	}
	if _, err := Open(context.Background(), "gopher://x"); err == nil {
		t.Error("Open(gopher://) succeeded")
	}
}

// TestCountingConn counts request turns: writes before an answer are one,
// and a read starts the next.
func TestCountingConn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			if buf[n-1] == '\n' { // a request ends with a newline
				c.Write([]byte("ok"))
			}
		}
	}()
	var rt Counter
	c, err := rt.Dial(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 2)
	for i := range 3 {
		c.Write([]byte("a"))
		c.Write([]byte("b\n")) // one request in two writes
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
		if got := rt.Load(); got != int64(i+1) {
			t.Fatalf("after %d requests, %d counted", i+1, got)
		}
	}
}

// TestZipf checks the generator against the distribution it draws from:
// the hottest key's share, and the top ten's, within 1% of the exact ones.
func TestZipf(t *testing.T) {
	const n, draws, theta = 1000, 400000, 0.99
	z := newZipf(rand.New(rand.NewPCG(1, 2)), n, theta)
	counts := make([]int, n)
	for range draws {
		counts[z.next()]++
	}
	zn := zeta(n, theta)
	top := 0
	for i := range 10 {
		top += counts[i]
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"key 0", float64(counts[0]) / draws, 1 / zn},
		{"top 10", float64(top) / draws, zeta(10, theta) / zn},
	} {
		// Gray's generator is exact for the two hottest keys and close
		// beyond them (YCSB's is the same): 0.397 for 0.383 here.
		if math.Abs(c.got-c.want) > 0.02 {
			t.Errorf("%s: share %.4f, want %.4f", c.name, c.got, c.want)
		}
	}
}

func TestHandoffs(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	samples := []sample{
		{client: 0, asked: 0, got: ms(1), freed: ms(5), relEnd: ms(6)},
		{client: 1, asked: ms(2), got: ms(7), freed: ms(8), relEnd: ms(9)},     // waited: 1ms
		{client: 1, asked: ms(10), got: ms(11), freed: ms(12), relEnd: ms(13)}, // same client
		{client: 0, asked: ms(14), got: ms(15), freed: ms(16), relEnd: ms(17)}, // asked after the release: not a hand-off
		{client: 2, asked: ms(15), got: ms(16) + ms(1)/2, freed: ms(18), relEnd: ms(19)},
	}
	got, raced := handoffs(samples, 1)
	want := []handoff{{fromReturn: ms(1), fromCall: ms(2)}, {fromReturn: 0, fromCall: ms(1) / 2}}
	if !slices.Equal(got, want) || raced != 1 {
		t.Fatalf("handoffs = %v, raced %d; want %v, 1", got, raced, want)
	}
}

func TestJain(t *testing.T) {
	if j := jain([]int64{5, 5, 5, 5}); j != 1 {
		t.Errorf("equal shares: %v", j)
	}
	if j := jain([]int64{8, 0, 0, 0}); j != 0.25 {
		t.Errorf("one takes all: %v", j)
	}
}

// benchGroups are the benchmarks' servers and groups, by kind: started
// once for every benchmark of the process.
var benchGroups sync.Map

type benchServer struct {
	srv *padlocktest.Server
	g   *Group
}

func (s *benchServer) close() {
	s.g.Close()
	s.srv.Close()
}

func benchGroup(b *testing.B, kind padlocktest.Kind) *Group {
	if s, ok := benchGroups.Load(kind); ok {
		return s.(*benchServer).g
	}
	srv, err := padlocktest.New(context.Background(), kind)
	if err != nil {
		if errors.Is(err, padlocktest.ErrMissing) && os.Getenv("PADLOCK_REQUIRE_SERVERS") != "1" {
			b.Skip(err)
		}
		b.Fatal(err)
	}
	g, err := Open(context.Background(), srv.URL())
	if err != nil {
		srv.Close()
		b.Fatal(err)
	}
	benchGroups.Store(kind, &benchServer{srv, g})
	return g
}

// BenchmarkU1 is one client's acquire and release on one name, for every
// implementation of every backend; it reports round trips per cycle.
//
//	go test -run '^$' -bench U1 -count 6 ./bench | benchstat -
func BenchmarkU1(b *testing.B) {
	for _, kind := range LocalKinds {
		b.Run(string(kind), func(b *testing.B) {
			g := benchGroup(b, kind)
			for _, im := range g.Impls {
				b.Run(im.Name, func(b *testing.B) { benchTurn(b, g, im, Load{Workload: U1, Clients: 1, Keys: 1}) })
			}
		})
	}
}

// BenchmarkU2 is sixteen clients, each on a name of its own: where the
// servers and the two cores are the limit, the throughput of every
// implementation of every backend. -short: two clients, to prove it runs.
func BenchmarkU2(b *testing.B) {
	p := 16
	if testing.Short() {
		p = 2
	}
	for _, kind := range LocalKinds {
		b.Run(string(kind), func(b *testing.B) {
			g := benchGroup(b, kind)
			for _, im := range g.Impls {
				b.Run(im.Name, func(b *testing.B) { benchTurn(b, g, im, Load{Workload: U2, Clients: p, Keys: p}) })
			}
		})
	}
}

// BenchmarkC1 is eight clients on one name, each holding it 1ms and
// thinking 1ms: the contended row of the targets.
func BenchmarkC1(b *testing.B) {
	for _, kind := range LocalKinds {
		b.Run(string(kind), func(b *testing.B) {
			g := benchGroup(b, kind)
			for _, im := range g.Impls {
				if im.Waits {
					b.Run(im.Name, func(b *testing.B) {
						benchTurn(b, g, im, Load{Workload: C1, Clients: 8, Keys: 1, Hold: time.Millisecond, Think: time.Millisecond})
					})
				}
			}
		})
	}
}

// benchTurn runs b.N acquisitions of load and reports its measures.
func benchTurn(b *testing.B, g *Group, im Impl, load Load) {
	prefix := fmt.Sprintf("padlock-bench/go-test/%d/", time.Now().UnixNano())
	b.ResetTimer()
	p, err := turn(context.Background(), g, im, load, prefix, time.Minute, int64(b.N), serverPIDs(g.Servers), 1)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	a := newAcc(g.Backend, im, load)
	a.add(p)
	r := a.result()
	// The time of the acquisitions alone, without opening and closing the
	// clients and resetting the servers.
	b.ReportMetric(float64(p.window.Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(r.RTPerAcq, "rt/op")
	if load.Contended() {
		b.ReportMetric(r.Wait.P99, "wait-p99-ms")
		b.ReportMetric(r.Handoff.P50, "handoff-p50-ms")
		b.ReportMetric(r.Utilisation, "utilisation")
		b.ReportMetric(r.Jain, "jain")
	}
}
