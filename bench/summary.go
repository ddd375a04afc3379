package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// TargetU1Change is the most padlock's uncontended cycle may lose against
// the floor from one run to another: the recipes' acceptance.
const TargetU1Change = 0.05

// WriteRecipe writes the summary of one recipe workload (R1, S1, E1) of
// a run, per backend, for the recipe's page: padlock against its mutex
// and the peers.
func WriteRecipe(w io.Writer, workload string, run NamedReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "From `%s` (run of %s, by `%s`, %d turns of %v per implementation and cell; [benchmarks.md](benchmarks.md#the-recipes-run) has every table).\n\n",
		run.Path, run.Started.Format("2006-01-02 15:04 MST"), run.Command, run.Rounds, run.Duration)
	rs := run.Results
	pick := func(x Result, impl string, clients int) (Result, bool) {
		for _, y := range rs {
			if y.Backend == x.Backend && y.Workload == x.Workload && y.Impl == impl && y.Clients == clients && y.Step == x.Step {
				return y, true
			}
		}
		return Result{}, false
	}
	most := func(backend string) int {
		n := 0
		for _, y := range rs {
			if y.Backend == backend && y.Workload == workload {
				n = max(n, y.Clients)
			}
		}
		return n
	}
	switch workload {
	case R1, S1:
		if workload == R1 {
			b.WriteString("| backend | impl | P | acq/s | ÷ padlock's mutex | P ÷ 1 client (readers scale) | wait p99 | most at once |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
		} else {
			b.WriteString("| backend | impl | P | n | acq/s | ÷ padlock's mutex (n = 1) | wait p99 | most at once |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
		}
		for _, x := range rs {
			if x.Workload != workload || x.Role == RoleMutex || x.Clients != most(x.Backend) {
				continue
			}
			if x.NA != "" {
				fmt.Fprintf(&b, "| %s | %s | %d | n/a: %s |%s\n", x.Backend, x.Impl, x.Clients, x.NA, strings.Repeat(" |", 4))
				continue
			}
			vsMutex := "-"
			if m, ok := pick(x, x.Impl+mutexSuffix, x.Clients); ok && m.PerSecond > 0 {
				vsMutex = times(x.PerSecond / m.PerSecond)
			}
			if workload == R1 {
				scale := "-"
				if one, ok := pick(x, x.Impl, 1); ok && one.PerSecond > 0 {
					scale = times(x.PerSecond / one.PerSecond)
				}
				fmt.Fprintf(&b, "| %s | %s | %d | %.0f | %s | %s | %s | %d |\n", x.Backend, x.Impl, x.Clients, x.PerSecond, vsMutex, scale, fmtMs(x.Wait.P99), x.Most)
			} else {
				fmt.Fprintf(&b, "| %s | %s | %d | %d | %.0f | %s | %s | %d |\n", x.Backend, x.Impl, x.Clients, x.Limit, x.PerSecond, vsMutex, fmtMs(x.Wait.P99), x.Most)
			}
		}
	case E1:
		b.WriteString("| backend | impl | hand-off p50 | p99 | failover p50 | p99 | ÷ TTL | observe p50 | p99 |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
		type row struct{ backend, impl string }
		var order []row
		for _, x := range rs {
			if x.Workload == E1 && !slices.Contains(order, row{x.Backend, x.Impl}) {
				order = append(order, row{x.Backend, x.Impl})
			}
		}
		for _, r := range order {
			cells := []string{}
			for _, step := range []string{StepHandoff, StepFailover, StepObserve} {
				x, ok := pick(Result{Backend: r.backend, Workload: E1, Step: step}, r.impl, 2)
				switch {
				case !ok || x.NA != "":
					n := 2
					if step == StepFailover {
						n = 3
					}
					na := "-"
					if ok {
						na = "n/a"
					}
					cells = append(cells, strings.Repeat(na+" | ", n))
				case step == StepHandoff:
					cells = append(cells, fmt.Sprintf("%s | %s | ", fmtMs(x.Handoff.P50), fmtMs(x.Handoff.P99)))
				case step == StepFailover:
					cells = append(cells, fmt.Sprintf("%s | %s | %.2f | ", fmtMs(x.Wait.P50), fmtMs(x.Wait.P99), x.Wait.P50/x.TTLMs))
				default:
					cells = append(cells, fmt.Sprintf("%s | %s | ", fmtMs(x.Wait.P50), fmtMs(x.Wait.P99)))
				}
			}
			fmt.Fprintf(&b, "| %s | %s | %s\n", r.backend, r.impl, strings.TrimSuffix(strings.Join(cells, ""), " "))
		}
		for _, x := range rs {
			if x.Workload == E1 && x.NA != "" {
				fmt.Fprintf(&b, "\n%s %s, %s: n/a: %s.", x.Backend, x.Impl, x.Step, x.NA)
			}
		}
		b.WriteString("\n")
	default:
		return fmt.Errorf("%w: %q is not a recipe workload (R1, S1, E1)", ErrInvalid, workload)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteU1 compares padlock's uncontended cycle against the wire floor
// (the floor's p50 ÷ padlock's, each within its own run) before and after
// a change, backend by backend, against TargetU1Change. Each side is one
// or more runs, made in turns (before, after, before, after, ...) so that
// both meet the same machine; a side's ratio is the median of its runs'.
func WriteU1(w io.Writer, before, after []NamedReport) error {
	if len(before) == 0 || len(after) == 0 {
		return fmt.Errorf("%w: u1 needs at least one run before and one after", ErrInvalid)
	}
	var b strings.Builder
	side := func(runs []NamedReport) string {
		var paths []string
		for _, r := range runs {
			paths = append(paths, fmt.Sprintf("`%s` (%s, %d turns of %v)", r.Path, r.Started.Format("2006-01-02 15:04"), r.Rounds, r.Duration))
		}
		return strings.Join(paths, ", ")
	}
	fmt.Fprintf(&b, "U1, the floor's cycle p50 ÷ padlock's, before: %s; after: %s. A side's value is the median of its runs (each run's value in brackets); a loss of at most %.0f%% meets the recipes' acceptance.\n\n",
		side(before), side(after), 100*TargetU1Change)
	b.WriteString("| backend | padlock | before | after | change | within 5%? |\n|---|---|---:|---:|---:|---|\n")
	type key struct{ backend, impl string }
	values := func(runs []NamedReport) (map[key][]float64, []key) {
		m := map[key][]float64{}
		var order []key
		for _, r := range runs {
			for _, q := range r.Ratios {
				if q.What != "speed vs floor" {
					continue
				}
				k := key{q.Backend, q.Impl}
				if _, ok := m[k]; !ok {
					order = append(order, k)
				}
				m[k] = append(m[k], q.Value)
			}
		}
		return m, order
	}
	was, _ := values(before)
	now, order := values(after)
	cell := func(vs []float64) string {
		parts := make([]string, len(vs))
		for i, v := range vs {
			parts[i] = fmt.Sprintf("%.2f", v)
		}
		if len(vs) == 1 {
			return parts[0]
		}
		return fmt.Sprintf("%.2f [%s]", median(vs), strings.Join(parts, ", "))
	}
	for _, k := range order {
		vs := now[k]
		ws, found := was[k]
		if !found {
			fmt.Fprintf(&b, "| %s | %s | - | %s | - | not in the earlier runs |\n", k.backend, k.impl, cell(vs))
			continue
		}
		change := median(vs)/median(ws) - 1
		met := "yes"
		if change < -TargetU1Change {
			met = "no"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %+.0f%% | %s |\n", k.backend, k.impl, cell(ws), cell(vs), 100*change, met)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// median is the median of vs (the mean of the middle two for an even
// count), which it leaves in their order.
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
