package faults

import (
	"cmp"
	"slices"
	"time"
)

// overlaps counts the holds that were in at once though they exclude each
// other: pairs of conflicting holds (a writer with anyone on its name),
// and each stretch of time with more than limit permits held on a name.
// With an expected MX, those of a faulted hold are the point; any other
// is a problem. The overlaps of a hold whose Done a stall of its own
// process held up (hold.stalled) count in Result.Stalled instead. A
// stretch of permits is the fault's (or the stall's) only if the holds
// in it that were neither faulted nor stalled kept the limit. It also
// records the most readers or permits held at once (Shared).
func (r *Result) overlaps(holds []*hold, limit int, problem func(string, ...any)) {
	overlap := func(d time.Duration, faulted bool, format string, args ...any) {
		r.Overlaps++
		r.OverlapTime += d
		r.OverlapMax = max(r.OverlapMax, d)
		if !r.Expected.overlapAllowed(faulted) {
			problem(format, append(args, d.Round(time.Millisecond))...)
		}
	}
	for i, a := range holds {
		for _, b := range holds[i+1:] {
			if !pairConflict(a, b) {
				continue
			}
			first := a
			if b.start < a.start {
				first = b
			}
			if lo, hi := max(a.start, b.start), min(a.end, b.end); lo < hi && !first.stalled {
				overlap(time.Duration(hi-lo), a.faulted || b.faulted, "clients %d (token %d) and %d (token %d) held at once for %v",
					a.client, a.token, b.client, b.token)
			}
		}
	}
	// Readers and permits: sweep each name's holds in time order.
	type point struct {
		t     int64
		delta int
		h     *hold
	}
	byName := map[string][]point{}
	for _, h := range holds {
		if h.kind == Reader || h.kind == Permit {
			byName[h.name] = append(byName[h.name], point{h.start, 1, h}, point{h.end, -1, h})
		}
	}
	// A stretch with more than limit permits held is the fault's (or a
	// stall's) only while the holds neither faulted nor stalled keep the
	// limit: a faulted or stalled hold in it excuses its own place, not
	// holds granted beyond the limit beside it. clean is, through the
	// stretch, the most of those held at once.
	for _, ps := range byName {
		// Ends before starts at one instant: a hand-over is not an overlap.
		slices.SortFunc(ps, func(a, b point) int { return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.delta, b.delta)) })
		open := map[*hold]bool{}
		var from int64
		faulted, stalled, clean := false, false, 0
		for _, p := range ps {
			if p.delta > 0 {
				open[p.h] = true
			} else {
				delete(open, p.h)
			}
			r.Shared = max(r.Shared, len(open))
			if p.h.kind != Permit {
				continue
			}
			switch excess := clean > limit; {
			case p.delta > 0 && len(open) == limit+1:
				from, faulted, stalled, clean = p.t, false, false, 0
			case p.delta < 0 && len(open) == limit && excess && (faulted || stalled):
				overlap(time.Duration(p.t-from), false, "%d permits held at once by holds no fault or stall explains, more than %d (client %d's, token %d, among them), for %v",
					clean, limit, p.h.client, p.h.token)
			case p.delta < 0 && len(open) == limit && (excess || !stalled):
				overlap(time.Duration(p.t-from), (faulted || p.h.faulted) && !excess, "more than %d permits held at once (client %d's, token %d, among them) for %v",
					limit, p.h.client, p.h.token)
			}
			if len(open) > limit {
				n := 0
				for h := range open {
					faulted = faulted || h.faulted
					stalled = stalled || h.stalled
					if !h.faulted && !h.stalled {
						n++
					}
				}
				clean = max(clean, n)
			}
		}
	}
	switch kinds := holdKinds(holds); {
	case kinds[Reader] && r.Shared < 2:
		problem("readers never held at once: the run did not test sharing")
	case kinds[Permit] && r.Shared < limit:
		problem("never %d permits held at once (at most %d): the run did not reach the limit", limit, r.Shared)
	}
}

// holdKinds are the kinds of holds a history has.
func holdKinds(holds []*hold) map[Kind]bool {
	out := map[Kind]bool{}
	for _, h := range holds {
		out[h.kind] = true
	}
	return out
}

// writes classifies the writes and checks the resource applied: stale
// when a conflicting hold was granted after the writer's own grant, and,
// on the fenced register, accepted after the newer holder's contact
// (fencing failed), before it, or refused. It also counts the accepted
// fenced writes and checks that came out of token order.
//
// A write or check under a token that no grant of its client on its name
// carries is a problem: a worker logs its grant (a write to its stdout, a
// pipe the run reads to its end before the check, whatever becomes of the
// worker) before it sends anything under it, so it is a bug of the suite
// or the lock (a token the worker was never given), which the checker
// could call neither stale nor fresh.
func (r *Result) writes(evs []Event, holds []*hold, limit int, problem func(string, ...any)) {
	type ungranted struct {
		client int
		name   string
		token  uint64
		check  bool
	}
	reported := map[ungranted]bool{}
	// contacted reports whether a client granted after t0 had shown the
	// resource its token on e's name before e (a writer, for a check:
	// readers do not fence readers).
	contacted := func(e Event, t0 int64) bool {
		for _, s := range evs {
			if s.T >= e.T {
				break
			}
			if s.Op == OpSeen && s.Client != e.Client && s.Name == e.Name && (!e.Check || kindOf(s).writes()) {
				if h := holdOf(holds, s.Client, s.Name, s.Token, s.T); h != nil && h.start > t0 {
					return true
				}
			}
		}
		return false
	}
	for _, e := range evs {
		if e.Op != OpApply {
			continue
		}
		g := holdOf(holds, e.Client, e.Name, e.Token, e.T)
		if g == nil {
			if k := (ungranted{e.Client, e.Name, e.Token, e.Check}); !reported[k] {
				reported[k] = true
				what := "write"
				if e.Check {
					what = "check"
				}
				problem("the resource saw client %d's %s with token %d on %q, which no grant of it carries", e.Client, what, e.Token, e.Name)
			}
			continue
		}
		next := firstConflict(holds, []*hold{g}, g.start, limit)
		stale := next != nil && next.start < e.T
		accepted := e.Accepted != nil && *e.Accepted
		switch {
		case e.Register == "unfenced" && stale:
			r.StaleUnfenced++
		case e.Register == "fenced" && stale && accepted && contacted(e, g.start):
			r.StaleFencedAccepted++
		case e.Register == "fenced" && stale && accepted:
			r.StaleBeforeContact++
		case e.Register == "fenced" && stale:
			r.StaleFencedRejected++
		case e.Register == "fenced" && !accepted:
			r.FreshRejected++
		}
	}
	r.FencedOrder = fencedOrder(evs)
}

// fencedOrder counts the fenced register's accepted writes and checks
// that came out of token order, per name: a token below that of a write
// it had accepted before, or equal to one of another client's (two
// leaders' writes accepted in one term).
func fencedOrder(evs []Event) int {
	type accepted struct {
		token  uint64
		client int
	}
	top := map[string]accepted{}
	n := 0
	for _, e := range evs {
		if e.Op != OpApply || e.Register != "fenced" || e.Accepted == nil || !*e.Accepted {
			continue
		}
		t, ok := top[e.Name]
		if ok && (e.Token < t.token || e.Token == t.token && e.Client != t.client) {
			n++
		}
		if !e.Check && (!ok || e.Token >= t.token) {
			top[e.Name] = accepted{e.Token, e.Client}
		}
	}
	return n
}
