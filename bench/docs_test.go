package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// report is a small made-up run: an uncontended cell and the targets'
// contended cell on etcd and Redis.
func report() *Report {
	u1 := func(backend, impl string, role Role, p50, rt float64, minRT int) Result {
		return Result{Backend: backend, Impl: impl, Role: role, Workload: U1, Cell: "U1", Acquisitions: 100, MinRT: minRT,
			RTPerAcq: rt, Cycle: Summary{P50: p50}, ClientCPUUs: 100 * p50, ServerCPUUs: 50 * p50,
			CycleCDF: []CDFPoint{{Ms: p50 / 2, Share: 0.1}, {Ms: p50, Share: 0.5}, {Ms: 2 * p50, Share: 1}}}
	}
	c1 := func(backend, impl string, role Role, util, p99, max, bound, jain float64) Result {
		return Result{Backend: backend, Impl: impl, Role: role, Workload: C1, Cell: "C1 W=8 hold=1ms think=1ms", Clients: 8,
			HoldMs: 1, ThinkMs: 1, Acquisitions: 100, Utilisation: util, Wait: Summary{P99: p99, Max: max}, FIFOBoundMs: bound, Jain: jain}
	}
	rs := []Result{
		u1("etcd", "floor", RoleFloor, 0.8, 2, 2), u1("etcd", "padlock", RolePadlock, 1.0, 2, 2), u1("etcd", "concurrency.Mutex", RolePeer, 0.9, 2, 2),
		u1("etcd", "floor-fenced", RoleFencedFloor, 0.85, 2, 2),
		u1("redis", "floor", RoleFloor, 0.1, 2, 2), u1("redis", "padlock", RolePadlock, 0.105, 2.01, 2), u1("redis", "padlock-fair", RolePadlock, 0.2, 3, 2),
		u1("redis", "floor-fenced", RoleFencedFloor, 0.11, 2, 2),
		c1("etcd", "padlock", RolePadlock, 0.6, 20, 40, 24, 1), c1("etcd", "concurrency.Mutex", RolePeer, 0.1, 100, 300, 0, 0.9),
		c1("redis", "padlock-fair", RolePadlock, 0.8, 20, 40, 24, 1), c1("redis", "redsync-10ms", RolePeer, 0.6, 150, 300, 0, 0.8),
	}
	return &Report{Started: time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC), Finished: time.Date(2026, 12, 2, 6, 10, 0, 0, time.UTC),
		Duration: time.Second, Rounds: 6, Workloads: []string{U1, C1}, Command: "padlock bench --local",
		Host:     Host{OS: "linux", Arch: "amd64", CPUs: 2, Go: "go1.26.8", Model: "Xeon", LoadStart: 1.5, LoadEnd: 2.25},
		Backends: []BackendInfo{{"etcd", "etcd://127.0.0.1:2379"}, {"redis", "redis://127.0.0.1:6379"}},
		Results:  rs, Ratios: ratios(rs)}
}

// Each target is measured and judged from the results: which backends met
// it, which half of a two-part target, and what a run did not measure.
func TestTargets(t *testing.T) {
	got := map[string]Target{}
	for _, tg := range report().Targets() {
		key := strings.Fields(tg.Target)[0]
		if key == "uncontended" && strings.Contains(tg.Target, "fenced floor's speed") {
			key = "fenced"
		}
		got[key] = tg
	}
	for _, c := range []struct{ key, measured, met string }{
		{"uncontended", "etcd 0.80; redis 0.95; redis padlock-fair 0.50", "only redis"},
		{"fenced", "etcd 0.85 (0.94); redis 1.05 (0.91); redis padlock-fair 0.55 (0.91)", "only redis"},
		{"round", "etcd 2.00 of 2; redis 2.01 of 2; redis padlock-fair 3.00 of 2", "all but redis padlock-fair"},
		{"etcd,", "utilisation 0.60 vs 0.10 (6.00×); p99 20.0ms vs 100ms (5.00× lower)", "yes"},
		{"fair", "utilisation 0.80 vs 0.60 (redsync-10ms): 1.33×; p99 20.0ms vs 150ms (redsync-10ms): 7.50× lower; max wait 40.0ms vs 300ms; Jain 1.00", "all but utilisation"},
		{"no", "etcd 1.67×; redis padlock-fair 1.67×", "yes"},
		{"U2", "", ""},
	} {
		tg := got[c.key]
		if tg.Measured != c.measured || tg.Met != c.met {
			t.Errorf("target %q:\n measured %q, met %q\n want     %q, met %q", tg.Target, tg.Measured, tg.Met, c.measured, c.met)
		}
	}
	var b strings.Builder
	if err := WriteTargets(&b, []NamedReport{{Label: "focused", Path: "bench/focused/results.json", Report: report()}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"**The focused run** (`bench/focused/results.json`): Run 2026-12-02 06:00 to 06:10 UTC on linux/amd64 with 2 CPUs (Xeon), go1.26.8, one-minute load average 1.50 at the start and 2.25 at the end, by `padlock bench --local`",
		"| U2 throughput ≥ the best peer's at every P (in brackets, where it ran: the fenced floor's ÷ the best peer's) | not in this run | - |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("targets lack %q:\n%s", want, b.String())
		}
	}
}

// RenderDoc renders each section from the results its marker names and
// leaves the rest of the document alone; rendering twice changes nothing.
func TestRenderDoc(t *testing.T) {
	targets := "<!-- bench:targets focused=f/results.json full=results.json" + markerSuffix
	doc := "# head\n\n" + targets + "\nold targets\n" + EndMarker + "\n\nprose\n\n" + RunMarker("f/results.json") + "\nold run\n" + EndMarker + "\ntail\n"
	loaded := map[string]int{}
	load := func(path string) (*Report, error) {
		loaded[path]++
		if path != "f/results.json" && path != "results.json" {
			return nil, fmt.Errorf("no file %s", path)
		}
		return report(), nil
	}
	out, err := RenderDoc([]byte(doc), "docs", load)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{"# head\n\n" + targets + "\n\n**The focused run** (`f/results.json`)", "**The full run** (`results.json`)",
		EndMarker + "\n\nprose\n\n" + RunMarker("f/results.json") + "\n\nRun 2026-12-02",
		"| etcd | padlock | floor | 1.0ms / 800µs (+200µs) | 100 / 80 (+20) | 50 / 40 (+10) |",
		"![etcd: latency of one acquire and release, uncontended (U1)](f/charts/etcd-cdf.svg)",
		"| W=8 hold=1ms think=1ms | padlock-fair |", EndMarker + "\ntail\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("document lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "old targets") || strings.Contains(s, "old run") || loaded["f/results.json"] != 2 || loaded["results.json"] != 1 {
		t.Errorf("old text kept, or results loaded %v:\n%s", loaded, s)
	}
	if again, err := RenderDoc(out, "docs", load); err != nil || string(again) != s {
		t.Errorf("rendering twice: %v, changed: %v", err, string(again) != s)
	}
	if got := DocSources(out); strings.Join(got, " ") != "f/results.json results.json" {
		t.Errorf("DocSources = %q", got)
	}
	u1 := []byte("<!-- bench:u1 run=u.json" + markerSuffix + "\n" + RunMarker("r.json") + "\n")
	if got := DocSources(u1); strings.Join(got, " ") != "u.json r.json" {
		t.Errorf("DocSources of a u1 section over several runs and a run section = %q", got)
	}
	if got := ChartedSources(u1); strings.Join(got, " ") != "r.json" {
		t.Errorf("ChartedSources = %q, want the run section's alone", got)
	}
	for _, bad := range []string{"no markers", RunMarker("f/results.json") + "\nno end\n", "<!-- bench:targets nolabel" + markerSuffix + "\n" + EndMarker} {
		if _, err := RenderDoc([]byte(bad), "docs", load); !errors.Is(err, ErrInvalid) {
			t.Errorf("RenderDoc(%q): %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := RenderDoc([]byte(RunMarker("gone.json")+"\n"+EndMarker), "docs", load); err == nil || !strings.Contains(err.Error(), "gone.json") {
		t.Errorf("a missing results file: %v", err)
	}
}

// The recipes' pages render their Measured sections from the committed
// results, as benchmarks.md does (TestBenchmarksDocGenerated in
// cmd/padlock): `go run ./cmd/padlock bench --docs
// docs/readwrite.md,docs/semaphore.md,docs/election.md` renders them.
func TestRecipeDocsGenerated(t *testing.T) {
	dir := filepath.Join("..", "docs")
	for _, page := range []string{"readwrite.md", "semaphore.md", "election.md"} {
		doc, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), "<!-- bench:recipe ") {
			t.Errorf("%s has no bench:recipe section", page)
			continue
		}
		got, err := RenderDoc(doc, dir, func(src string) (*Report, error) { return ReadFile(filepath.Join(dir, src)) })
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(doc) {
			t.Errorf("docs/%s differs from what its results render: run go run ./cmd/padlock bench --docs docs/%s", page, page)
		}
	}
}

// WriteU1 compares each padlock implementation with its twin at the
// earlier revision in the same run: etcd's cycle 1.0ms after against
// 0.98ms before is -2%, within; Redis's 0.105ms against 0.095ms is -10%,
// not; fair Redis has no twin. A run without twins is refused.
func TestWriteU1OneRun(t *testing.T) {
	r := report()
	twin := func(backend, impl string, p50 float64) Result {
		return Result{Backend: backend, Impl: impl + BeforeSuffix, Role: RolePadlock, Workload: U1, Acquisitions: 100,
			Cycle: Summary{P50: p50}, ClientCPUUs: 90, ServerCPUUs: -1}
	}
	r.Results = append(r.Results, twin("etcd", "padlock", 0.98), twin("redis", "padlock", 0.095))
	var b strings.Builder
	if err := WriteU1(&b, NamedReport{Path: "u1/results.json", Report: r}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| etcd | padlock | 980µs | 1.0ms | -2.0% | 90 | 100 | - | 50 | yes |",
		"| redis | padlock | 95µs | 105µs | -9.5% | 90 | 10 | - | 5 | no |",
		"| redis | padlock-fair | - | 200µs | - | - | 20 | - | 10 | not at the earlier revision |",
		"`u1/results.json` (2026-12-02 06:00, 6 turns of 1s each, interleaved)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("u1 section lacks %q:\n%s", want, b.String())
		}
	}
	if err := WriteU1(&b, NamedReport{Path: "r.json", Report: report()}); !errors.Is(err, ErrInvalid) {
		t.Errorf("u1 of a run without twins: %v, want ErrInvalid", err)
	}
}

// fencedFloorOf finds the fenced floor of padlock's mode, else the
// backend's one, else a floor that is fenced as it is; never a plain
// floor, nor one without acquisitions.
func TestFencedFloorOf(t *testing.T) {
	r := func(impl string, role Role, fenced bool, acq int64) Result {
		return Result{Impl: impl, Role: role, Fenced: fenced, Acquisitions: acq}
	}
	for _, c := range []struct {
		name, padlock string
		cell          []Result
		want          string // "" when there is none
	}{
		{"sql lease", "padlock", []Result{r("floor-fenced-advisory", RoleFencedFloor, false, 1), r("floor-fenced-lease", RoleFencedFloor, false, 1)}, "floor-fenced-lease"},
		{"sql advisory", "padlock-advisory", []Result{r("floor-fenced-lease", RoleFencedFloor, false, 1), r("floor-fenced-advisory", RoleFencedFloor, false, 1)}, "floor-fenced-advisory"},
		{"one fenced floor", "padlock-fair", []Result{r("floor", RoleFloor, false, 1), r("floor-fenced", RoleFencedFloor, false, 1)}, "floor-fenced"},
		{"a fenced floor as it is", "padlock", []Result{r("floor", RoleFloor, true, 1)}, "floor"},
		{"a plain floor", "padlock", []Result{r("floor", RoleFloor, false, 1)}, ""},
		{"no acquisitions", "padlock", []Result{r("floor-fenced", RoleFencedFloor, false, 0)}, ""},
	} {
		f, ok := fencedFloorOf(c.cell, Result{Impl: c.padlock, Role: RolePadlock})
		if got := map[bool]string{true: f.Impl}[ok]; got != c.want {
			t.Errorf("%s: fenced floor %q, want %q", c.name, got, c.want)
		}
	}
}

// The U2 target shows, beside padlock's range against the best peer, the
// fenced floor's: whether a lock with tokens keeps up with the peers.
func TestU2TargetFencedFloor(t *testing.T) {
	u2 := func(impl string, role Role, p int, perSecond float64) Result {
		return Result{Backend: "redis", Impl: impl, Role: role, Workload: U2, Cell: fmt.Sprintf("U2 P=%d", p), Clients: p, Keys: p,
			Acquisitions: 100, PerSecond: perSecond}
	}
	rs := []Result{
		u2("padlock", RolePadlock, 4, 700), u2("floor-fenced", RoleFencedFloor, 4, 1000), u2("bsm-redislock", RolePeer, 4, 1000),
		u2("padlock", RolePadlock, 16, 900), u2("floor-fenced", RoleFencedFloor, 16, 1100), u2("bsm-redislock", RolePeer, 16, 1000),
	}
	rep := &Report{Results: rs, Ratios: ratios(rs)}
	for _, tg := range rep.Targets() {
		if !strings.HasPrefix(tg.Target, "U2") {
			continue
		}
		if want := "redis 0.70–0.90× (bsm-redislock) [1.00–1.10×]"; tg.Measured != want || tg.Met != "no" {
			t.Errorf("U2 target: measured %q, met %q; want %q, no", tg.Measured, tg.Met, want)
		}
		return
	}
	t.Fatal("no U2 target")
}
