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
// (the floor's p50 ÷ padlock's, each within its own run) in two runs,
// backend by backend, against TargetU1Change.
func WriteU1(w io.Writer, before, after NamedReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "U1, the floor's cycle p50 ÷ padlock's, in `%s` (before: %s, %d turns of %v) and `%s` (after: %s, %d turns of %v); a loss of at most %.0f%% meets the recipes' acceptance.\n\n",
		before.Path, before.Started.Format("2006-01-02 15:04"), before.Rounds, before.Duration,
		after.Path, after.Started.Format("2006-01-02 15:04"), after.Rounds, after.Duration, 100*TargetU1Change)
	b.WriteString("| backend | padlock | before | after | change | within 5%? |\n|---|---|---:|---:|---:|---|\n")
	for _, q := range after.Ratios {
		if q.What != "speed vs floor" {
			continue
		}
		var was Ratio
		found := false
		for _, p := range before.Ratios {
			if p.What == q.What && p.Backend == q.Backend && p.Impl == q.Impl && p.Versus == q.Versus {
				was, found = p, true
			}
		}
		if !found {
			fmt.Fprintf(&b, "| %s | %s | - | %.2f | - | not in the earlier run |\n", q.Backend, q.Impl, q.Value)
			continue
		}
		change := q.Value/was.Value - 1
		met := "yes"
		if change < -TargetU1Change {
			met = "no"
		}
		fmt.Fprintf(&b, "| %s | %s | %.2f | %.2f | %+.0f%% | %s |\n", q.Backend, q.Impl, was.Value, q.Value, 100*change, met)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}
