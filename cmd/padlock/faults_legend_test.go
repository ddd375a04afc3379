package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/padlock-go/padlock/faults"
)

// padlock faults prints a legend of every code its table shows: the
// expected outcome of every scenario on every backend, and the verdicts.
func TestFaultsLegend(t *testing.T) {
	var results []faults.Result
	for _, b := range faults.Backends {
		for _, sc := range faults.Scenarios {
			r := faults.Result{Backend: b.Name, Scenario: sc.ID, Name: sc.Name, Expected: faults.SAFE, Verdict: "ok"}
			if sc.Expect != nil {
				r.Expected = sc.Expect(b)
			}
			if b.Only != nil && !slices.Contains(b.Only, sc.ID) {
				r.Expected, r.Verdict = faults.NA, "n/a"
			}
			results = append(results, r)
		}
	}
	var out bytes.Buffer
	writeFaultsReport(&out, results)
	table, legend, ok := strings.Cut(out.String(), "\n\n")
	if !ok {
		t.Fatalf("no legend under the table:\n%s", out.String())
	}
	explained := map[string]bool{}
	for _, line := range strings.Split(legend, "\n") {
		if strings.HasPrefix(line, "  ") {
			if f := strings.Fields(line); len(f) > 1 {
				explained[f[0]] = true
			}
		}
	}
	lines := strings.Split(strings.TrimSpace(table), "\n")
	header := strings.Fields(lines[0])
	if header[2] != "expect" || header[len(header)-1] != "verdict" {
		t.Fatalf("unexpected table header %q", lines[0])
	}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		// backend, scenario number and name, then the expected outcome.
		if code := f[3]; !explained[code] {
			t.Errorf("the table shows %q (%s) and the legend does not explain it:\n%s", code, line, legend)
		}
		if v := f[len(f)-1]; !explained[v] {
			t.Errorf("the table shows the verdict %q and the legend does not explain it", v)
		}
	}
	for _, o := range faults.Outcomes {
		if o.Meaning() == "" {
			t.Errorf("outcome %s has no meaning for the legend", o)
		}
	}
}
