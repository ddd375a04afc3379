package bench

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/perf/benchfmt"
)

// GoBench is `go test -bench` output as committed: every result line's
// metrics (by unit, ns/op included), by benchmark name without
// "Benchmark" and its GOMAXPROCS suffix, one entry per run (-count).
type GoBench map[string][]map[string]float64

// ParseGoBench reads `go test -bench` output. Output without any result
// line is ErrInvalid; so is a line benchfmt cannot read.
func ParseGoBench(out []byte, file string) (GoBench, error) {
	r := benchfmt.NewReader(bytes.NewReader(out), file)
	g := GoBench{}
	for r.Scan() {
		switch rec := r.Result().(type) {
		case *benchfmt.Result:
			name := trimProcs(string(rec.Name.Full()))
			m := map[string]float64{}
			for _, v := range rec.Values {
				if v.OrigUnit != "" { // as written, not tidied to base units
					m[v.OrigUnit] = v.OrigValue
				} else {
					m[v.Unit] = v.Value
				}
			}
			g[name] = append(g[name], m)
		case *benchfmt.SyntaxError:
			return nil, fmt.Errorf("%w: %v", ErrInvalid, rec)
		}
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, file, err)
	}
	if len(g) == 0 {
		return nil, fmt.Errorf("%w: %s: no benchmark result", ErrInvalid, file)
	}
	return g, nil
}

// trimProcs cuts a benchmark's name from its GOMAXPROCS suffix (-2),
// which benchfmt's Name keeps.
func trimProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 || i+1 == len(name) || strings.Trim(name[i+1:], "0123456789") != "" {
		return name
	}
	return name[:i]
}

// Span is the range of a benchmark's metric over its runs, formatted by
// format: "a" when every run gave the same text, "a–b" otherwise, "-"
// where no run has it.
func (g GoBench) Span(name, unit string, format func(float64) string) string {
	var vs []float64
	for _, m := range g[name] {
		if v, ok := m[unit]; ok {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return "-"
	}
	lo, hi := format(slices.Min(vs)), format(slices.Max(vs))
	if lo == hi {
		return lo
	}
	return lo + "–" + hi
}

// usAsMs formats microseconds as milliseconds, two decimals.
func usAsMs(us float64) string { return fixed2(us/1000) + " ms" }

// ratioX formats a ratio as 0.93×.
func ratioX(v float64) string { return fixed2(v) + "×" }
