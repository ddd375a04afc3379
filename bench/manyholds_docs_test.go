package bench

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// manyHoldsOut is BenchmarkManyHolds' output in both forms: a cell that
// met its target (a result line) and one that failed (its numbers in the
// message).
const manyHoldsOut = `goos: linux
BenchmarkManyHolds/etcd/holds=1000-2         	       1	15000138030 ns/op	         2.152 base-cpu-ms/s	         2.899 cpu-µs/hold/s	      1493 heap-B/hold	         0 lost	         0.7479 net-cpu-µs/hold/s	         0.8 net-hi-µs/hold/s	         0.61 net-lo-µs/hold/s	        12.67 server-cpu-µs/hold/s
BenchmarkManyHolds/etcd/holds=20000-2        	       1	15000251575 ns/op	         2.152 base-cpu-ms/s	         0.7509 cpu-µs/hold/s	      1266 heap-B/hold	         0 lost	         0.6434 net-cpu-µs/hold/s	         1.067 server-cpu-µs/hold/s
--- FAIL: BenchmarkManyHolds/redis/holds=1000
    manyholds_test.go:92: each hold adds 3.45 µs of CPU per second; the target is at most 3 (4.934 cpu-µs/hold/s, 3.451 net-cpu-µs/hold/s, 1.487 base-cpu-ms/s, 7.333 server-cpu-µs/hold/s, 2755 heap-B/hold, 0 lost)
BenchmarkManyHolds/redis/holds=20000-2       	       1	15000251575 ns/op	         1.487 base-cpu-ms/s	         2.9 cpu-µs/hold/s	      1551 heap-B/hold	         0 lost	         2.8 net-cpu-µs/hold/s	         4.733 server-cpu-µs/hold/s
--- FAIL: BenchmarkManyHolds/redis
FAIL
`

func TestParseManyHolds(t *testing.T) {
	cells, err := ParseManyHolds([]byte(manyHoldsOut))
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) != 4 {
		t.Fatalf("%d cells, want 4: %+v", len(cells), cells)
	}
	if c := cells[2]; c.Backend != "redis" || c.Holds != 1000 || c.Metrics["net-cpu-µs/hold/s"] != 3.451 || c.Metrics["heap-B/hold"] != 2755 {
		t.Errorf("the failed cell read as %+v", c)
	}
	if c := cells[1]; c.Backend != "etcd" || c.Holds != 20000 || c.Metrics["server-cpu-µs/hold/s"] != 1.067 || c.Metrics["base-cpu-ms/s"] != 2.152 {
		t.Errorf("the result line read as %+v", c)
	}
	var out bytes.Buffer
	if err := WriteManyHolds(&out, cells, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| etcd | 0.75 → 0.64 | 0.61–0.80 → - | 2.90 → 0.75 | 12.7 → 1.07 | 1.3 KB | ≤ 1: met |", // rounds at 1,000 only
		"| Redis | 3.45 → 2.80 | - → - | 4.93 → 2.90 | 7.33 → 4.73 | 1.6 KB | ≤ 3: not met |",    // over at 1,000
		"spent 1.5 to 2.2 ms", "No hold was lost",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}

	for _, bad := range []string{
		"nothing here\n",
		"--- FAIL: BenchmarkManyHolds/redis/holds=1000\n", // no numbers
		"--- FAIL: BenchmarkManyHolds/redis/holds=1000\n    x.go:1: over (3.4 µs/hold/s, nonsense)\n",
	} {
		if _, err := ParseManyHolds([]byte(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseManyHolds(%q): %v, want ErrInvalid", bad, err)
		}
	}
}

// A manyholds section renders from the benchmark output its marker names,
// with the run before beside it; a marker without run= is refused.
func TestRenderManyHoldsSection(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"now.txt", "before.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(manyHoldsOut), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	noJSON := func(string) (*Report, error) { t.Fatal("a manyholds section loads no results.json"); return nil, nil }
	doc := "x\n<!-- bench:manyholds run=now.txt before=before.txt" + markerSuffix + "\nSTALE\n" + EndMarker + "\ny\n"
	out, err := RenderDoc([]byte(doc), dir, noJSON)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(out); strings.Contains(s, "STALE") || !strings.Contains(s, "| etcd | 0.75 → 0.64") || !strings.Contains(s, "0.75 / 1.07 (20,000 holds)") ||
		!strings.HasSuffix(s, EndMarker+"\ny\n") {
		t.Errorf("rendered:\n%s", s)
	}
	if got := DocSources([]byte(doc)); len(got) != 0 {
		t.Errorf("DocSources lists %q, a manyholds section's output is no results.json", got)
	}
	for _, bad := range []string{"before=before.txt", "run=now.txt run=now.txt", "other=now.txt"} {
		doc := "<!-- bench:manyholds " + bad + markerSuffix + "\n" + EndMarker + "\n"
		if _, err := RenderDoc([]byte(doc), dir, noJSON); !errors.Is(err, ErrInvalid) {
			t.Errorf("section %q: %v, want ErrInvalid", bad, err)
		}
	}
}

// TestManyRoundsNet: each round's net cost is its window against the mean
// of the base windows on either side of it, per hold beyond the base's
// one and per second, in µs; rounds of two Lockers (two b.N) stay apart.
func TestManyRoundsNet(t *testing.T) {
	var r manyRounds
	// n = 11 holds, a window of 2s: 10 holds beyond the base, 20 hold-seconds.
	r.add(manyRounds{cpu: []float64{3e6, 5e6}, base: [][]float64{{1e6, 3e6, 1e6}}})
	r.add(manyRounds{cpu: []float64{2e6}, base: [][]float64{{2e6, 2e6}}})
	got := r.net(11, 2*time.Second)
	want := []float64{(3e6 - 2e6) / 1e3 / 20, (5e6 - 2e6) / 1e3 / 20, 0}
	if !slices.Equal(got, want) {
		t.Errorf("net = %v, want %v", got, want)
	}
	if m := median(got); m != want[0] {
		t.Errorf("median = %v, want %v", m, want[0])
	}
	if b := r.allBases(); len(b) != 5 {
		t.Errorf("allBases = %v, want the 5 windows", b)
	}
}
