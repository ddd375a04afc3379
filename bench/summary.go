package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// TargetU1Change is the most padlock's uncontended cycle may lose from
// before a change to after it, in one run: the recipes' acceptance.
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

// WriteU1 compares padlock's uncontended cycle before and after a change,
// measured in one run: run holds each padlock implementation and its twin
// at the earlier revision (named with BeforeSuffix; scripts/bench-u1 links
// it in), which took turns on the same servers. The change is the
// before's cycle p50 over the after's, less one, judged against
// TargetU1Change; the CPU each side spent per cycle explains it.
func WriteU1(w io.Writer, run NamedReport) error {
	type key struct{ backend, impl string }
	now := map[key]Result{}
	var order []key
	was := map[key]Result{}
	for _, x := range run.Results {
		if x.Workload != U1 || x.Role != RolePadlock || x.Acquisitions == 0 {
			continue
		}
		if impl, ok := strings.CutSuffix(x.Impl, BeforeSuffix); ok {
			was[key{x.Backend, impl}] = x
			continue
		}
		k := key{x.Backend, x.Impl}
		now[k] = x
		order = append(order, k)
	}
	if len(was) == 0 {
		return fmt.Errorf("%w: u1: %s has no implementation at the earlier revision (%s): make it with scripts/bench-u1", ErrInvalid, run.Path, BeforeSuffix)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "U1 in one run, `%s` (%s, %d turns of %v each, interleaved): padlock before the change (the %s implementations) and after it, on the same servers. The change is the before's cycle p50 over the after's; a loss of at most %.0f%% meets the recipes' acceptance.\n\n",
		run.Path, run.Started.Format("2006-01-02 15:04"), run.Rounds, run.Duration, BeforeSuffix, 100*TargetU1Change)
	b.WriteString("| backend | padlock | cycle p50 before | after | change | client CPU µs before | after | server CPU µs before | after | within 5%? |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	cpu := func(v float64) string {
		if v < 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f", v)
	}
	for _, k := range order {
		x := now[k]
		y, found := was[k]
		if !found {
			fmt.Fprintf(&b, "| %s | %s | - | %s | - | - | %s | - | %s | not at the earlier revision |\n", k.backend, k.impl, fmtMs(x.Cycle.P50), cpu(x.ClientCPUUs), cpu(x.ServerCPUUs))
			continue
		}
		change := y.Cycle.P50/x.Cycle.P50 - 1
		met := "yes"
		if change < -TargetU1Change {
			met = "no"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %+.1f%% | %s | %s | %s | %s | %s |\n", k.backend, k.impl, fmtMs(y.Cycle.P50), fmtMs(x.Cycle.P50),
			100*change, cpu(y.ClientCPUUs), cpu(x.ClientCPUUs), cpu(y.ServerCPUUs), cpu(x.ServerCPUUs), met)
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
