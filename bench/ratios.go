package bench

import (
	"fmt"
	"strings"
)

// Ratio compares padlock with a reference on one cell.
type Ratio struct {
	// What is measured: "speed vs floor" (the floor's cycle p50 ÷
	// padlock's: 1 is the floor's speed), "speed vs fenced floor" (the
	// same against the fenced floor, RoleFencedFloor), "fenced floor vs
	// floor" (the floor's p50 ÷ the fenced floor's: the most a fenced
	// lock's speed can be of the floor's), "throughput vs fenced floor",
	// "fenced floor vs best peer" (U2: whether a lock with tokens can keep
	// up with the peers at all), "speed vs best peer", "RT vs
	// minimum" (round trips ÷ the protocol's minimum), "throughput vs best
	// peer", "utilisation vs best peer", "p99 wait: best peer ÷ padlock",
	// "max wait: best peer ÷ padlock", "max wait vs FIFO bound".
	What    string  `json:"what"`
	Backend string  `json:"backend"`
	Cell    string  `json:"cell"`
	Impl    string  `json:"impl"`
	Value   float64 `json:"value"`
	// Versus names the reference.
	Versus string `json:"versus"`
}

// ratios compares each padlock implementation with the floors and the best
// peer of its backend, cell by cell.
func ratios(rs []Result) []Ratio {
	type key struct{ backend, cell string }
	byCell := map[key][]Result{}
	var order []key
	for _, r := range rs {
		k := key{r.Backend, r.Cell}
		if _, ok := byCell[k]; !ok {
			order = append(order, k)
		}
		byCell[k] = append(byCell[k], r)
	}
	var out []Ratio
	for _, k := range order {
		cell := byCell[k]
		for _, p := range cell {
			if p.Role != RolePadlock || p.Acquisitions == 0 {
				continue
			}
			add := func(what string, v float64, versus string) {
				out = append(out, Ratio{What: what, Backend: k.backend, Cell: k.cell, Impl: p.Impl, Value: v, Versus: versus})
			}
			switch p.Workload {
			case U1:
				f, ok := floorOf(cell, p, func(r Result) float64 { return -r.Cycle.P50 })
				if ok {
					add("speed vs floor", f.Cycle.P50/p.Cycle.P50, f.Impl)
				}
				if ff, fok := fencedFloorOf(cell, p); fok {
					add("speed vs fenced floor", ff.Cycle.P50/p.Cycle.P50, ff.Impl)
					if ok {
						add("fenced floor vs floor", f.Cycle.P50/ff.Cycle.P50, f.Impl)
					}
				}
				if b, ok := best(cell, RolePeer, func(r Result) float64 { return -r.Cycle.P50 }); ok {
					add("speed vs best peer", b.Cycle.P50/p.Cycle.P50, b.Impl)
				}
				if p.MinRT > 0 {
					add("RT vs minimum", p.RTPerAcq/float64(p.MinRT), "min")
				}
			case U2:
				if f, ok := floorOf(cell, p, func(r Result) float64 { return r.PerSecond }); ok {
					add("throughput vs floor", p.PerSecond/f.PerSecond, f.Impl)
				}
				b, ok := best(cell, RolePeer, func(r Result) float64 { return r.PerSecond })
				if ok {
					add("throughput vs best peer", p.PerSecond/b.PerSecond, b.Impl)
				}
				if ff, fok := fencedFloorOf(cell, p); fok && ff.PerSecond > 0 {
					add("throughput vs fenced floor", p.PerSecond/ff.PerSecond, ff.Impl)
					if ok {
						add("fenced floor vs best peer", ff.PerSecond/b.PerSecond, b.Impl)
					}
				}
			case C1, C2:
				// At hold 0 both utilisations are near 0 by definition.
				if b, ok := best(cell, RolePeer, func(r Result) float64 { return r.Utilisation }); ok && b.Utilisation > 0 && p.HoldMs > 0 {
					add("utilisation vs best peer", p.Utilisation/b.Utilisation, b.Impl)
				}
				if b, ok := best(cell, RolePeer, func(r Result) float64 { return -r.Wait.P99 }); ok && p.Wait.P99 > 0 {
					add("p99 wait: best peer ÷ padlock", b.Wait.P99/p.Wait.P99, b.Impl)
				}
				// A peer that lets one client take the lock back again and
				// again has a low p99 (the hog waits little) and a high
				// maximum (the others starve): the maximum tells.
				if b, ok := best(cell, RolePeer, func(r Result) float64 { return -r.Wait.Max }); ok && p.Wait.Max > 0 {
					add("max wait: best peer ÷ padlock", b.Wait.Max/p.Wait.Max, b.Impl)
				}
				if p.FIFOBoundMs > 0 {
					add("max wait vs FIFO bound", p.Wait.Max/p.FIFOBoundMs, "W×(hold+hand-off)")
				}
			}
		}
	}
	return append(out, recipeRatios(rs)...)
}

// recipeRatios compares each recipe with padlock's mutex on the same
// cell (R1, S1), each R1 implementation's throughput at its most clients
// with its throughput at one ("readers scale"), and each failover with
// the lease (E1).
func recipeRatios(rs []Result) []Ratio {
	var out []Ratio
	for _, p := range rs {
		if p.NA != "" || p.Acquisitions == 0 {
			continue
		}
		switch {
		case (p.Workload == R1 || p.Workload == S1) && p.Role == RolePadlock:
			for _, m := range rs {
				if m.Backend == p.Backend && m.Cell == p.Cell && m.Impl == p.Impl+mutexSuffix && m.PerSecond > 0 {
					out = append(out, Ratio{What: p.Workload + " throughput vs the mutex", Backend: p.Backend, Cell: p.Cell, Impl: p.Impl, Value: p.PerSecond / m.PerSecond, Versus: m.Impl})
				}
			}
		case p.Workload == E1 && p.Step == StepFailover && p.TTLMs > 0:
			out = append(out, Ratio{What: "E1 failover p50 ÷ TTL", Backend: p.Backend, Cell: p.Cell, Impl: p.Impl, Value: p.Wait.P50 / p.TTLMs, Versus: fmtMs(p.TTLMs)})
		}
	}
	// Readers scale: the most clients' throughput over one client's.
	for _, p := range rs {
		if p.Workload != R1 || p.Clients != 1 || p.NA != "" || p.PerSecond == 0 {
			continue
		}
		top := p
		for _, q := range rs {
			if q.Workload == R1 && q.Backend == p.Backend && q.Impl == p.Impl && q.NA == "" && q.Clients > top.Clients && q.Acquisitions > 0 {
				top = q
			}
		}
		if top.Clients > 1 {
			out = append(out, Ratio{What: "R1 readers scale", Backend: p.Backend, Cell: fmt.Sprintf("R1 P=%d ÷ P=1", top.Clients), Impl: p.Impl,
				Value: top.PerSecond / p.PerSecond, Versus: "P=1"})
		}
	}
	return out
}

// floorOf returns the floor that p is measured against: the one of its
// mode when the backend has several (padlock-advisory: floor-advisory;
// padlock in SQL's lease mode: floor-lease), else the best.
func floorOf(cell []Result, p Result, score func(Result) float64) (Result, bool) {
	want := "floor-lease"
	if mode, ok := strings.CutPrefix(p.Impl, "padlock-"); ok {
		want = "floor-" + mode
	}
	for _, r := range cell {
		if r.Role == RoleFloor && r.Impl == want && r.Acquisitions > 0 {
			return r, true
		}
	}
	return best(cell, RoleFloor, score)
}

// fencedFloorOf returns the fenced floor that p is measured against: the
// one of its mode (padlock-advisory: floor-fenced-advisory; padlock in
// SQL's lease mode: floor-fenced-lease), else the backend's one
// floor-fenced, else a floor that is fenced as it is (ZooKeeper's).
func fencedFloorOf(cell []Result, p Result) (Result, bool) {
	want := "floor-fenced-lease"
	if mode, ok := strings.CutPrefix(p.Impl, "padlock-"); ok {
		want = "floor-fenced-" + mode
	}
	var (
		other Result
		found bool
	)
	for _, r := range cell {
		switch {
		case r.Acquisitions == 0:
		case r.Role == RoleFencedFloor && r.Impl == want:
			return r, true
		case r.Role == RoleFencedFloor && r.Impl == "floor-fenced", r.Role == RoleFloor && r.Fenced && !found:
			other, found = r, true
		}
	}
	return other, found
}

// best returns the result of role in cell that scores highest, among
// those that completed acquisitions.
func best(cell []Result, role Role, score func(Result) float64) (Result, bool) {
	var b Result
	found := false
	for _, r := range cell {
		if r.Role != role || r.Acquisitions == 0 {
			continue
		}
		if !found || score(r) > score(b) {
			b, found = r, true
		}
	}
	return b, found
}
