package bench

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// WriteMarkdown writes the report as the generated section of one run in
// docs/benchmarks.md: the run (its machine and command), its servers,
// padlock's uncontended cost over each floor, the ratios' ranges and every
// ratio, then per backend its charts (paths relative to docDir) and one
// table per workload.
func (r *Report) WriteMarkdown(w io.Writer, charts Charts, docDir string) error {
	var b strings.Builder
	b.WriteString(r.runLine())
	b.WriteString("\n\n| backend | servers |\n|---|---|\n")
	for _, x := range r.Backends {
		fmt.Fprintf(&b, "| %s | `%s` |\n", x.Backend, x.URL)
	}
	r.writeFloorCost(&b)
	r.writeFencedCost(&b)
	r.writeRanges(&b)
	if len(r.Ratios) > 0 {
		b.WriteString("\n#### Ratios\n\n")
		b.WriteString("Speed ratios are the reference's median ÷ padlock's (above 1: padlock is faster); throughput and utilisation ratios are padlock's ÷ the reference's; RT ratios are round trips counted ÷ the protocol's minimum.\n\n")
		for _, what := range ratioKinds(r.Ratios) {
			fmt.Fprintf(&b, "**%s**\n\n| backend | cell | padlock | value | versus |\n|---|---|---|---:|---|\n", what)
			for _, q := range r.Ratios {
				if q.What == what {
					fmt.Fprintf(&b, "| %s | %s | %s | %.2f | %s |\n", q.Backend, q.Cell, q.Impl, q.Value, q.Versus)
				}
			}
			b.WriteString("\n")
		}
	}
	for _, be := range r.Backends {
		fmt.Fprintf(&b, "#### %s\n\n", be.Backend)
		for _, c := range charts {
			if c.Backend == be.Backend {
				rel, err := filepath.Rel(docDir, c.SVG)
				if err != nil {
					rel = c.SVG
				}
				fmt.Fprintf(&b, "![%s](%s)\n\n", c.Title, filepath.ToSlash(rel))
			}
		}
		rs := r.of(be.Backend)
		for _, wl := range r.Workloads {
			var ws []Result
			for _, x := range rs {
				if x.Workload == wl {
					ws = append(ws, x)
				}
			}
			if len(ws) == 0 {
				continue
			}
			fmt.Fprintf(&b, "**%s**\n\n", wl)
			switch wl {
			case R1, S1, E1:
				writeRecipeTable(&b, wl, ws)
			case U1, U2:
				b.WriteString("| cell | impl | acq/s | cycle p50 | p99 | p99.9 | max | acquire p50 | release p50 | RT/acq | min RT | CPU µs client | server |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
				for _, x := range ws {
					fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %.2f | %d | %.0f | %s |\n", x.Cell, x.Impl, x.PerSecond,
						fmtMs(x.Cycle.P50), fmtMs(x.Cycle.P99), fmtMs(x.Cycle.P999), fmtMs(x.Cycle.Max), fmtMs(x.Wait.P50), fmtMs(x.Release.P50),
						x.RTPerAcq, x.MinRT, x.ClientCPUUs, serverCPU(x))
				}
			default:
				b.WriteString("| cell | impl | acq/s | wait p50 | p99 | max | hand-off p50 | p99 | raced | from call p50 | util | Jain | wasted RT/acq | gave up | CPU µs client | server |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
				for _, x := range ws {
					hof, hof99, raced, call := "-", "-", "-", "-"
					if x.Handoff.Count > 0 {
						hof, hof99, call = fmtMs(x.Handoff.P50), fmtMs(x.Handoff.P99), fmtMs(x.HandoffFromCall.P50)
						raced = fmt.Sprintf("%.0f%%", 100*float64(x.HandoffRaced)/float64(x.Handoff.Count))
					}
					fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %.2f | %.2f | %.2f | %d | %.0f | %s |\n", strings.TrimPrefix(x.Cell, wl+" "), x.Impl, x.PerSecond,
						fmtMs(x.Wait.P50), fmtMs(x.Wait.P99), fmtMs(x.Wait.Max), hof, hof99, raced, call, x.Utilisation, x.Jain, x.WastedPerAcq, x.GaveUp, x.ClientCPUUs, serverCPU(x))
				}
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeRecipeTable writes the results of a recipe workload: R1 and S1 as
// acquisitions with the most holds at once, E1 by step; a cell that an
// implementation did not run says why.
func writeRecipeTable(b *strings.Builder, wl string, ws []Result) {
	na := func(x Result, cols int) string {
		return fmt.Sprintf("| %s | %s | n/a: %s |%s\n", strings.TrimPrefix(x.Cell, wl+" "), x.Impl, x.NA, strings.Repeat(" |", cols-3))
	}
	if wl == E1 {
		b.WriteString("| step | impl | p50 | p99 | max | samples | also |\n|---|---|---:|---:|---:|---:|---|\n")
		for _, x := range ws {
			if x.NA != "" {
				b.WriteString(na(x, 7))
				continue
			}
			s, also := x.Wait, ""
			switch x.Step {
			case StepHandoff:
				s = x.Handoff
				also = fmt.Sprintf("from the resignation's call: p50 %s, p99 %s", fmtMs(x.HandoffFromCall.P50), fmtMs(x.HandoffFromCall.P99))
			case StepFailover:
				also = fmt.Sprintf("lease %s: p50 = %.2f × TTL", fmtMs(x.TTLMs), x.Wait.P50/x.TTLMs)
			case StepObserve:
				also = fmt.Sprintf("%d of %d received before Proclaim returned", x.HandoffRaced, s.Count)
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %d | %s |\n", strings.TrimPrefix(x.Cell, wl+" "), x.Impl, fmtMs(s.P50), fmtMs(s.P99), fmtMs(s.Max), s.Count, also)
		}
		b.WriteString("\n")
		return
	}
	b.WriteString("| cell | impl | acq/s | wait p50 | p99 | max | most at once | Jain | CPU µs client | server |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, x := range ws {
		if x.NA != "" {
			b.WriteString(na(x, 10))
			continue
		}
		fmt.Fprintf(b, "| %s | %s | %.0f | %s | %s | %s | %d | %.2f | %.0f | %s |\n", strings.TrimPrefix(x.Cell, wl+" "), x.Impl, x.PerSecond,
			fmtMs(x.Wait.P50), fmtMs(x.Wait.P99), fmtMs(x.Wait.Max), x.Most, x.Jain, x.ClientCPUUs, serverCPU(x))
	}
	b.WriteString("\n")
}

func serverCPU(x Result) string {
	if x.ServerCPUUs < 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", x.ServerCPUUs)
}

func ratioKinds(rs []Ratio) []string {
	var kinds []string
	for _, q := range rs {
		if !contains(kinds, q.What) {
			kinds = append(kinds, q.What)
		}
	}
	return kinds
}

// runLine says when and where the run was made, and how.
func (r *Report) runLine() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run %s to %s", r.Started.Format("2006-01-02 15:04"), r.Finished.Format("15:04 MST"))
	h := r.Host
	if h.OS == "" {
		b.WriteString(" on a machine the results do not record")
	} else {
		fmt.Fprintf(&b, " on %s/%s with %d CPUs", h.OS, h.Arch, h.CPUs)
		if h.Model != "" {
			fmt.Fprintf(&b, " (%s)", h.Model)
		}
		fmt.Fprintf(&b, ", %s", h.Go)
		if h.LoadStart >= 0 && h.LoadEnd >= 0 {
			fmt.Fprintf(&b, ", one-minute load average %.2f at the start and %.2f at the end", h.LoadStart, h.LoadEnd)
		}
	}
	if r.Command != "" {
		fmt.Fprintf(&b, ", by `%s`", r.Command)
	}
	fmt.Fprintf(&b, ": each implementation took %d turns of %v on each cell, interleaved, with the servers' state reset after each turn.", r.Rounds, r.Duration)
	return b.String()
}

// writeFloorCost writes what padlock's uncontended cycle costs over the
// floor it is measured against: time, and CPU on each side.
func (r *Report) writeFloorCost(b *strings.Builder) {
	var rows []string
	for _, p := range r.padlocks(func(x Result) bool { return x.Workload == U1 }) {
		f, ok := floorOf(r.cellOf(p), p, func(r Result) float64 { return -r.Cycle.P50 })
		if !ok {
			continue
		}
		server := "-"
		if p.ServerCPUUs >= 0 && f.ServerCPUUs >= 0 {
			server = fmt.Sprintf("%.0f / %.0f (%+.0f)", p.ServerCPUUs, f.ServerCPUUs, p.ServerCPUUs-f.ServerCPUUs)
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s / %s (%+.0fµs) | %.0f / %.0f (%+.0f) | %s |", p.Backend, p.Impl, f.Impl,
			fmtMs(p.Cycle.P50), fmtMs(f.Cycle.P50), 1000*(p.Cycle.P50-f.Cycle.P50), p.ClientCPUUs, f.ClientCPUUs, p.ClientCPUUs-f.ClientCPUUs, server))
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("\n#### The uncontended cycle against the floor\n\n")
	b.WriteString("U1, padlock ÷ the wire floor of the same client library: the cycle's median, and the CPU each side spends per cycle (client: this process; server: the servers' processes).\n\n")
	b.WriteString("| backend | padlock | floor | cycle p50 | CPU µs client | server |\n|---|---|---|---:|---:|---:|\n")
	b.WriteString(strings.Join(rows, "\n") + "\n")
}

// writeFencedCost writes, for the uncontended cycle, the floor, the
// fenced floor and padlock side by side: what fencing costs any client on
// the wire, and what padlock's own work costs beyond it.
func (r *Report) writeFencedCost(b *strings.Builder) {
	var rows []string
	for _, p := range r.padlocks(func(x Result) bool { return x.Workload == U1 }) {
		cell := r.cellOf(p)
		ff, ok := fencedFloorOf(cell, p)
		if !ok {
			continue
		}
		floor, share := "-", "-"
		if f, ok := floorOf(cell, p, func(r Result) float64 { return -r.Cycle.P50 }); ok {
			floor, share = fmtMs(f.Cycle.P50), fmt.Sprintf("%.2f", f.Cycle.P50/ff.Cycle.P50)
		}
		server := "-"
		if p.ServerCPUUs >= 0 && ff.ServerCPUUs >= 0 {
			server = fmt.Sprintf("%.0f / %.0f (%+.0f)", p.ServerCPUUs, ff.ServerCPUUs, p.ServerCPUUs-ff.ServerCPUUs)
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s / %s / %s | %s | %.2f | %.0f / %.0f (%+.0f) | %s |", p.Backend, p.Impl, ff.Impl,
			fmtMs(p.Cycle.P50), fmtMs(ff.Cycle.P50), floor, share, ff.Cycle.P50/p.Cycle.P50,
			p.ClientCPUUs, ff.ClientCPUUs, p.ClientCPUUs-ff.ClientCPUUs, server))
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("\n#### The uncontended cycle against the fenced floor\n\n")
	b.WriteString("U1, padlock beside the fenced floor (the floor with a fencing token taken in the request that grants, and a release that frees only its own hold) and the floor. *Fenced ÷ floor* is the floor's median cycle over the fenced floor's: the share of the floor's speed that a lock with padlock's tokens and release can reach at most. *padlock ÷ fenced* is the fenced floor's median over padlock's: what padlock's own work costs beyond that. CPU per cycle, padlock / the fenced floor.\n\n")
	b.WriteString("| backend | padlock | fenced floor | cycle p50: padlock / fenced / floor | fenced ÷ floor | padlock ÷ fenced | CPU µs client | server |\n|---|---|---|---:|---:|---:|---:|---:|\n")
	b.WriteString(strings.Join(rows, "\n") + "\n")
}

// writeRanges writes each ratio's range over the cells that measured it
// (the uncontended ones have one cell, and are in the ratio tables only).
func (r *Report) writeRanges(b *strings.Builder) {
	var rows []string
	for _, g := range r.ratioRanges() {
		if g.Cells < 2 {
			continue
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %d | %.2f | %.2f | %s |", g.What, g.Backend, g.Impl, g.Cells, g.Min, g.Max, strings.Join(g.Versus, ", ")))
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("\n#### Ratios over the cells\n\n")
	b.WriteString("Each ratio below (defined under Ratios), from its lowest to its highest over the cells of its workload.\n\n")
	b.WriteString("| ratio | backend | padlock | cells | lowest | highest | versus |\n|---|---|---|---:|---:|---:|---|\n")
	b.WriteString(strings.Join(rows, "\n") + "\n")
}

// cellOf is every result of x's backend and cell.
func (r *Report) cellOf(x Result) []Result {
	var out []Result
	for _, y := range r.Results {
		if y.Backend == x.Backend && y.Cell == x.Cell {
			out = append(out, y)
		}
	}
	return out
}

// NamedReport is a run as a document names it.
type NamedReport struct {
	Label string // "focused", "full"
	Path  string // its results.json, as the document names it
	*Report
}

// WriteTargets writes, for each run, a table of the benchmark's targets
// and what the run measured against each.
func WriteTargets(w io.Writer, runs []NamedReport) error {
	var b strings.Builder
	for _, run := range runs {
		fmt.Fprintf(&b, "**The %s run** (`%s`): %s\n\n", run.Label, run.Path, run.runLine())
		b.WriteString("| target | measured | met? |\n|---|---|---|\n")
		for _, t := range run.Targets() {
			m, met := t.Measured, t.Met
			if m == "" {
				m, met = "not in this run", "-"
			}
			fmt.Fprintf(&b, "| %s | %s | %s |\n", t.Target, m, met)
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
