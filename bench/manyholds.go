package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ManyHoldsCell is one cell of BenchmarkManyHolds (one backend, one number
// of holds) as its `go test -bench` output records it: a result line where
// the cell met its target, or, where it failed, the numbers its failure
// message gives.
type ManyHoldsCell struct {
	Backend string // the padlocktest kind: etcd, redis, redis+cluster, ...
	Holds   int
	// Metrics by unit: cpu-µs/hold/s, net-cpu-µs/hold/s, base-cpu-ms/s,
	// server-cpu-µs/hold/s, heap-B/hold, lost.
	Metrics map[string]float64
}

var (
	manyHoldsLine = regexp.MustCompile(`^BenchmarkManyHolds/([^/\s]+)/holds=(\d+)(?:-\d+)?\s+\d+\s+(.*)$`)
	manyHoldsFail = regexp.MustCompile(`^--- FAIL: BenchmarkManyHolds/([^/\s]+)/holds=(\d+)\s*$`)
	manyHoldsMsg  = regexp.MustCompile(`\(([^()]*µs/hold/s[^()]*)\)\s*$`)
)

// ParseManyHolds reads the cells of BenchmarkManyHolds from its `go test
// -bench` output. A cell without numbers, or output without any cell, is
// ErrInvalid.
func ParseManyHolds(out []byte) ([]ManyHoldsCell, error) {
	var cells []ManyHoldsCell
	var failed *ManyHoldsCell // a failed cell whose message is next
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if m := manyHoldsLine.FindStringSubmatch(line); m != nil {
			c, err := manyHoldsCell(m[1], m[2])
			if err != nil {
				return nil, err
			}
			f := strings.Fields(m[3])
			for i := 0; i+1 < len(f); i += 2 {
				if f[i+1] == "ns/op" {
					continue
				}
				v, err := strconv.ParseFloat(f[i], 64)
				if err != nil {
					return nil, fmt.Errorf("%w: many holds: %q: %v", ErrInvalid, line, err)
				}
				c.Metrics[f[i+1]] = v
			}
			cells = append(cells, c)
			continue
		}
		if m := manyHoldsFail.FindStringSubmatch(line); m != nil {
			c, err := manyHoldsCell(m[1], m[2])
			if err != nil {
				return nil, err
			}
			failed = &c
			continue
		}
		if m := manyHoldsMsg.FindStringSubmatch(line); m != nil && failed != nil {
			for _, kv := range strings.Split(m[1], ",") {
				f := strings.Fields(kv)
				if len(f) != 2 {
					return nil, fmt.Errorf("%w: many holds: %q: want VALUE UNIT", ErrInvalid, kv)
				}
				v, err := strconv.ParseFloat(f[0], 64)
				if err != nil {
					return nil, fmt.Errorf("%w: many holds: %q: %v", ErrInvalid, line, err)
				}
				failed.Metrics[f[1]] = v
			}
			cells = append(cells, *failed)
			failed = nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if failed != nil {
		return nil, fmt.Errorf("%w: many holds: %s/holds=%d failed without its numbers", ErrInvalid, failed.Backend, failed.Holds)
	}
	if len(cells) == 0 {
		return nil, fmt.Errorf("%w: many holds: no BenchmarkManyHolds cell", ErrInvalid)
	}
	return cells, nil
}

func manyHoldsCell(backend, holds string) (ManyHoldsCell, error) {
	n, err := strconv.Atoi(holds)
	if err != nil {
		return ManyHoldsCell{}, fmt.Errorf("%w: many holds: holds=%q", ErrInvalid, holds)
	}
	return ManyHoldsCell{Backend: backend, Holds: n, Metrics: map[string]float64{}}, nil
}

// ManyHoldsTarget is issue 27's target for what keeping one hold may cost
// a Locker's process, in µs of CPU per hold and second, on the backend of
// padlocktest kind backend: 1 where one lease or session renews every
// hold (etcd, ZooKeeper), 3 elsewhere.
func ManyHoldsTarget(backend string) float64 {
	switch backend {
	case "etcd", "zookeeper":
		return 1
	}
	return 3
}

// manyHoldsNames are the backends' names in the table, in its order.
var manyHoldsNames = []struct{ kind, name string }{
	{"etcd", "etcd"}, {"zookeeper", "ZooKeeper"}, {"redis", "Redis"}, {"redis+cluster", "Redis Cluster"},
	{"redlock", "RedLock (3 masters)"}, {"postgres", "PostgreSQL"}, {"mysql", "MySQL"},
}

// WriteManyHolds writes the many-holds table from the cells of one run,
// and, if before is not nil, each backend's cost at its most holds in an
// earlier run (all client CPU per hold, the one metric both record).
func WriteManyHolds(w io.Writer, cells, before []ManyHoldsCell) error {
	type row struct{ cells []ManyHoldsCell }
	rows := map[string]*row{}
	for _, c := range cells {
		if rows[c.Backend] == nil {
			rows[c.Backend] = &row{}
		}
		rows[c.Backend].cells = append(rows[c.Backend].cells, c)
	}
	most := func(cs []ManyHoldsCell, backend string) (ManyHoldsCell, bool) {
		var out ManyHoldsCell
		for _, c := range cs {
			if c.Backend == backend && c.Holds > out.Holds {
				out = c
			}
		}
		return out, out.Holds > 0
	}
	var sizes []int
	for _, c := range cells {
		if !slices.Contains(sizes, c.Holds) {
			sizes = append(sizes, c.Holds)
		}
	}
	slices.Sort(sizes)
	span := func(cs []ManyHoldsCell, unit string, format func(float64) string) string {
		var parts []string
		for _, n := range sizes {
			i := slices.IndexFunc(cs, func(c ManyHoldsCell) bool { return c.Holds == n })
			v, ok := 0.0, false
			if i >= 0 {
				v, ok = cs[i].Metrics[unit]
			}
			if !ok {
				parts = append(parts, "-")
				continue
			}
			parts = append(parts, format(v))
		}
		return strings.Join(parts, " → ")
	}
	var sizeNames []string
	for _, n := range sizes {
		sizeNames = append(sizeNames, thousands(n))
	}
	ns := strings.Join(sizeNames, " → ")
	// The rounds' least and most net cost, where the run measured rounds
	// (BenchmarkManyHolds' net-lo and net-hi): the spread behind the
	// median.
	spread := func(cs []ManyHoldsCell) string {
		var parts []string
		for _, n := range sizes {
			i := slices.IndexFunc(cs, func(c ManyHoldsCell) bool { return c.Holds == n })
			if i < 0 {
				parts = append(parts, "-")
				continue
			}
			lo, okLo := cs[i].Metrics["net-lo-µs/hold/s"]
			hi, okHi := cs[i].Metrics["net-hi-µs/hold/s"]
			if !okLo || !okHi {
				parts = append(parts, "-")
				continue
			}
			parts = append(parts, fixed2(lo)+"–"+fixed2(hi))
		}
		return strings.Join(parts, " → ")
	}
	fmt.Fprintf(w, "| backend | net client µs per hold per second, %s holds | the rounds' net, least–most | all client µs per hold per second, %s | server µs per hold per second, %s | heap per hold, %s |", ns, ns, ns, thousands(sizes[len(sizes)-1]))
	if before != nil {
		fmt.Fprint(w, " all client / server µs per hold per second at the most holds, the run before |")
	}
	fmt.Fprintln(w, " target |")
	fmt.Fprint(w, "|---|---:|---:|---:|---:|---:|")
	if before != nil {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w, "---|")
	var lost float64
	baseLo, baseHi := -1.0, -1.0
	for _, bn := range manyHoldsNames {
		r := rows[bn.kind]
		if r == nil {
			continue
		}
		target, met := ManyHoldsTarget(bn.kind), true
		for _, c := range r.cells {
			if v, ok := c.Metrics["net-cpu-µs/hold/s"]; !ok || v > target {
				met = false
			}
			lost += c.Metrics["lost"]
			if b, ok := c.Metrics["base-cpu-ms/s"]; ok {
				if baseLo < 0 || b < baseLo {
					baseLo = b
				}
				baseHi = max(baseHi, b)
			}
		}
		heap := "-"
		if c, ok := most(r.cells, bn.kind); ok {
			if v, ok := c.Metrics["heap-B/hold"]; ok {
				heap = fmt.Sprintf("%.1f KB", v/1000)
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |", bn.name, span(r.cells, "net-cpu-µs/hold/s", fixed2), spread(r.cells),
			span(r.cells, "cpu-µs/hold/s", fixed2), span(r.cells, "server-cpu-µs/hold/s", sig3), heap)
		if before != nil {
			b := "-"
			if c, ok := most(before, bn.kind); ok {
				if v, ok := c.Metrics["cpu-µs/hold/s"]; ok {
					srv := "-"
					if v, ok := c.Metrics["server-cpu-µs/hold/s"]; ok {
						srv = sig3(v)
					}
					b = fmt.Sprintf("%s / %s (%s holds)", fixed2(v), srv, thousands(c.Holds))
				}
			}
			fmt.Fprintf(w, " %s |", b)
		}
		verdict := "not met"
		if met {
			verdict = "met"
		}
		fmt.Fprintf(w, " ≤ %v: %s |\n", target, verdict)
	}
	fmt.Fprintln(w)
	if baseLo >= 0 {
		fmt.Fprintf(w, "A Locker holding one name (the base) spent %s to %s ms of CPU a second. ", fixed1(baseLo), fixed1(baseHi))
	}
	if lost == 0 {
		fmt.Fprintln(w, "No hold was lost in any cell.")
	} else {
		fmt.Fprintf(w, "**%v holds were lost while held.**\n", lost)
	}
	fmt.Fprintln(w)
	return nil
}

// fixed2 and fixed1 format with two and one decimals, a negative number
// with a minus sign; sig3 with three significant digits.
func fixed2(v float64) string { return minus(strconv.FormatFloat(v, 'f', 2, 64)) }
func fixed1(v float64) string { return minus(strconv.FormatFloat(v, 'f', 1, 64)) }
func sig3(v float64) string {
	switch {
	case v < 10:
		return fixed2(v)
	case v < 100:
		return fixed1(v)
	}
	return minus(strconv.FormatFloat(v, 'f', 0, 64))
}
func minus(s string) string { return strings.Replace(s, "-", "−", 1) }

// thousands writes n with a comma between thousands (20,000).
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
