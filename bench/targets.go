package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// The benchmark's targets, which WriteTargets holds each run against.
const (
	// TargetFloorSpeed: padlock's uncontended cycle at least this share
	// of the wire floor's speed, and of the fenced floor's.
	TargetFloorSpeed = 0.95
	// TargetRTSlack: round trips per uncontended cycle within this of the
	// protocol's minimum (background renewals and keepalives count).
	TargetRTSlack = 0.05
	// TargetEtcdUtil and TargetEtcdP99: on etcd's contended cell, padlock's
	// utilisation at least this many times concurrency.Mutex's, and its
	// p99 wait at most the Mutex's ÷ TargetEtcdP99.
	TargetEtcdUtil = 3.0
	TargetEtcdP99  = 3.0
	// TargetFairUtil, TargetFairP99 and TargetFairJain: fair Redis on the
	// contended cell against the best peer.
	TargetFairUtil = 1.5
	TargetFairP99  = 5.0
	TargetFairJain = 0.99
	// TargetStarvation: the longest wait at most this many FIFO bounds.
	TargetStarvation = 2.0
)

// targetCell is the contended cell the targets are set on: W=8, hold 1ms,
// think 1ms.
func targetCell(x Result) bool {
	return x.Workload == C1 && x.Clients == 8 && x.HoldMs == 1 && x.ThinkMs == 1
}

// Target is one target, as one run measured it.
type Target struct {
	Target   string
	Measured string // "" when the run did not measure it
	Met      string
}

// Targets holds the run against each target.
func (r *Report) Targets() []Target {
	return []Target{r.floorSpeedTarget(), r.fencedSpeedTarget(), r.rtTarget(), r.etcdTarget(), r.fairTarget(), r.starvationTarget(), r.u2Target()}
}

// padlocks are the padlock implementations' results that keep, in order.
func (r *Report) padlocks(keep func(Result) bool) []Result {
	var out []Result
	for _, x := range r.Results {
		if x.Role == RolePadlock && x.Acquisitions > 0 && keep(x) {
			out = append(out, x)
		}
	}
	return out
}

// ratioOf is the ratio what of x's implementation on x's cell, if any.
func (r *Report) ratioOf(what string, x Result) (Ratio, bool) {
	for _, q := range r.Ratios {
		if q.What == what && q.Backend == x.Backend && q.Cell == x.Cell && q.Impl == x.Impl {
			return q, true
		}
	}
	return Ratio{}, false
}

// label names an implementation of a backend: "redis", "redis padlock-fair".
func label(x Result) string {
	if x.Impl == "padlock" {
		return x.Backend
	}
	return x.Backend + " " + x.Impl
}

// verdict says which of the measured met a target: every one, none, or
// which (the shorter list of the two).
func verdict(met, all []string) string {
	switch {
	case len(all) == 0:
		return ""
	case len(met) == len(all):
		return "yes"
	case len(met) == 0:
		return "no"
	case 2*len(met) > len(all):
		var not []string
		for _, x := range all {
			if !slices.Contains(met, x) {
				not = append(not, x)
			}
		}
		return "all but " + strings.Join(not, ", ")
	}
	return "only " + strings.Join(met, ", ")
}

func (r *Report) floorSpeedTarget() Target {
	t := Target{Target: fmt.Sprintf("uncontended cycle ≥ %.2f× the wire floor's speed", TargetFloorSpeed)}
	var parts, met, all []string
	for _, x := range r.padlocks(func(x Result) bool { return x.Workload == U1 }) {
		q, ok := r.ratioOf("speed vs floor", x)
		if !ok {
			continue
		}
		vs := ""
		if q.Versus != "floor" {
			vs = " (vs " + q.Versus + ")"
		}
		parts = append(parts, fmt.Sprintf("%s %.2f%s", label(x), q.Value, vs))
		all = append(all, label(x))
		if q.Value >= TargetFloorSpeed {
			met = append(met, label(x))
		}
	}
	t.Measured, t.Met = strings.Join(parts, "; "), verdict(met, all)
	return t
}

// fencedSpeedTarget holds padlock's uncontended cycle against the fenced
// floor, with the fenced floor's own share of the floor's speed beside it:
// where that share is below the target, no lock with padlock's tokens and
// safe release can meet the floor target on that backend.
func (r *Report) fencedSpeedTarget() Target {
	t := Target{Target: fmt.Sprintf("uncontended cycle ≥ %.2f× the fenced floor's speed (in brackets: the fenced floor's speed ÷ the floor's)", TargetFloorSpeed)}
	var parts, met, all []string
	for _, x := range r.padlocks(func(x Result) bool { return x.Workload == U1 }) {
		q, ok := r.ratioOf("speed vs fenced floor", x)
		if !ok {
			continue
		}
		part := fmt.Sprintf("%s %.2f", label(x), q.Value)
		if f, ok := r.ratioOf("fenced floor vs floor", x); ok {
			part += fmt.Sprintf(" (%.2f)", f.Value)
		}
		parts = append(parts, part)
		all = append(all, label(x))
		if q.Value >= TargetFloorSpeed {
			met = append(met, label(x))
		}
	}
	t.Measured, t.Met = strings.Join(parts, "; "), verdict(met, all)
	return t
}

func (r *Report) rtTarget() Target {
	t := Target{Target: fmt.Sprintf("round trips per uncontended cycle = the protocol's minimum (within %.2f)", TargetRTSlack)}
	var parts, met, all []string
	for _, x := range r.padlocks(func(x Result) bool { return x.Workload == U1 && x.MinRT > 0 }) {
		parts = append(parts, fmt.Sprintf("%s %.2f of %d", label(x), x.RTPerAcq, x.MinRT))
		all = append(all, label(x))
		if x.RTPerAcq <= float64(x.MinRT)+TargetRTSlack {
			met = append(met, label(x))
		}
	}
	t.Measured, t.Met = strings.Join(parts, "; "), verdict(met, all)
	return t
}

// peer is the named implementation's result on x's cell.
func (r *Report) peer(x Result, impl string) (Result, bool) {
	for _, y := range r.Results {
		if y.Backend == x.Backend && y.Cell == x.Cell && y.Impl == impl && y.Acquisitions > 0 {
			return y, true
		}
	}
	return Result{}, false
}

func (r *Report) etcdTarget() Target {
	t := Target{Target: fmt.Sprintf("etcd, W=8 hold 1ms think 1ms: utilisation ≥ %.0f× concurrency.Mutex's, p99 wait ≤ 1/%.0f of its", TargetEtcdUtil, TargetEtcdP99)}
	for _, x := range r.padlocks(func(x Result) bool { return x.Backend == "etcd" && targetCell(x) }) {
		m, ok := r.peer(x, "concurrency.Mutex")
		if !ok || m.Utilisation == 0 || x.Wait.P99 == 0 {
			continue
		}
		util, p99 := x.Utilisation/m.Utilisation, m.Wait.P99/x.Wait.P99
		t.Measured = fmt.Sprintf("utilisation %.2f vs %.2f (%s); p99 %s vs %s (%s lower)",
			x.Utilisation, m.Utilisation, times(util), fmtMs(x.Wait.P99), fmtMs(m.Wait.P99), times(p99))
		t.Met = both(util >= TargetEtcdUtil, p99 >= TargetEtcdP99, "utilisation", "p99")
	}
	return t
}

// both says which of two halves of a target were met.
func both(a, b bool, an, bn string) string {
	switch {
	case a && b:
		return "yes"
	case a:
		return an + " only"
	case b:
		return bn + " only"
	}
	return "no"
}

func (r *Report) fairTarget() Target {
	t := Target{Target: fmt.Sprintf("fair Redis, W=8 hold 1ms think 1ms: utilisation ≥ %.1f× the best peer's, p99 wait ≥ %.0f× lower, Jain ≥ %.2f",
		TargetFairUtil, TargetFairP99, TargetFairJain)}
	for _, x := range r.padlocks(func(x Result) bool { return x.Backend == "redis" && x.Impl == "padlock-fair" && targetCell(x) }) {
		u, uok := r.ratioOf("utilisation vs best peer", x)
		p, pok := r.ratioOf("p99 wait: best peer ÷ padlock", x)
		if !uok || !pok {
			continue
		}
		bu, _ := r.peer(x, u.Versus)
		bp, _ := r.peer(x, p.Versus)
		t.Measured = fmt.Sprintf("utilisation %.2f vs %.2f (%s): %s; p99 %s vs %s (%s): %s lower; max wait %s vs %s; Jain %.2f",
			x.Utilisation, bu.Utilisation, u.Versus, times(u.Value), fmtMs(x.Wait.P99), fmtMs(bp.Wait.P99), p.Versus, times(p.Value),
			fmtMs(x.Wait.Max), fmtMs(bp.Wait.Max), x.Jain)
		var met []string
		for _, c := range []struct {
			ok   bool
			name string
		}{{u.Value >= TargetFairUtil, "utilisation"}, {p.Value >= TargetFairP99, "p99"}, {x.Jain >= TargetFairJain, "Jain"}} {
			if c.ok {
				met = append(met, c.name)
			}
		}
		t.Met = verdict(met, []string{"utilisation", "p99", "Jain"})
	}
	return t
}

func (r *Report) starvationTarget() Target {
	t := Target{Target: fmt.Sprintf("no starvation, W=8 hold 1ms think 1ms: max wait ≤ %.0f× the FIFO bound W × (hold + hand-off p50)", TargetStarvation)}
	var parts, met, all []string
	for _, x := range r.padlocks(targetCell) {
		q, ok := r.ratioOf("max wait vs FIFO bound", x)
		if !ok {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s", label(x), times(q.Value)))
		all = append(all, label(x))
		if q.Value <= TargetStarvation {
			met = append(met, label(x))
		}
	}
	t.Measured, t.Met = strings.Join(parts, "; "), verdict(met, all)
	return t
}

func (r *Report) u2Target() Target {
	t := Target{Target: "U2 throughput ≥ the best peer's at every P (in brackets, where it ran: the fenced floor's ÷ the best peer's)"}
	var parts, met, all []string
	ranges := r.ratioRanges()
	for _, g := range ranges {
		if g.What != "throughput vs best peer" {
			continue
		}
		part := fmt.Sprintf("%s %.2f–%.2f× (%s)", label(Result{Backend: g.Backend, Impl: g.Impl}), g.Min, g.Max, strings.Join(g.Versus, ", "))
		for _, f := range ranges {
			if f.What == "fenced floor vs best peer" && f.Backend == g.Backend && f.Impl == g.Impl {
				part += fmt.Sprintf(" [%.2f–%.2f×]", f.Min, f.Max)
			}
		}
		parts = append(parts, part)
		all = append(all, label(Result{Backend: g.Backend, Impl: g.Impl}))
		if g.Min >= 1 {
			met = append(met, label(Result{Backend: g.Backend, Impl: g.Impl}))
		}
	}
	t.Measured, t.Met = strings.Join(parts, "; "), verdict(met, all)
	return t
}

// times formats a ratio: two decimals below 10, so that a value near a
// target's threshold shows on which side it fell, one above.
func times(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.2f×", v)
	}
	return fmt.Sprintf("%.1f×", v)
}

// ratioRange is one kind of ratio of one padlock implementation over
// every cell where the run measured it.
type ratioRange struct {
	What, Backend, Impl string
	Cells               int
	Min, Max            float64
	Versus              []string
}

// ratioRanges groups the run's ratios by kind, backend and
// implementation, in the order they first appear.
func (r *Report) ratioRanges() []ratioRange {
	var out []ratioRange
	for _, q := range r.Ratios {
		i := slices.IndexFunc(out, func(g ratioRange) bool { return g.What == q.What && g.Backend == q.Backend && g.Impl == q.Impl })
		if i < 0 {
			out = append(out, ratioRange{What: q.What, Backend: q.Backend, Impl: q.Impl, Min: math.Inf(1), Max: math.Inf(-1)})
			i = len(out) - 1
		}
		g := &out[i]
		g.Cells++
		g.Min, g.Max = min(g.Min, q.Value), max(g.Max, q.Value)
		if !slices.Contains(g.Versus, q.Versus) {
			g.Versus = append(g.Versus, q.Versus)
		}
	}
	return out
}
