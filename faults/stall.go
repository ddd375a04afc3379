package faults

import (
	"context"
	"slices"
	"time"
)

// A worker's process may stall with no fault injected: a loaded machine
// (the suite beside other test packages on two cores, under the race
// detector) can run none of it for a tenth of a second or more. A hold
// whose Done came due in such a stall closes it only when the process
// runs again, which may be after the server granted the lock to another
// client: that is the paused holder of scenario 1, which no lease-based
// lock can tell in time, not a late Done of the lock's. Each worker
// measures its own stalls (stallProbe), and the checker excuses a late
// Done that one of them explains: it counts in Result.Stalled, not in
// LateDone, and neither it nor the overlaps it made fail a check (the
// late Done's, the fault's "Done closed after the next grant", the
// overlaps'). The excuse is a pass the lock did not earn, so it is
// shown (the cell's summary, padlock faults' table, TestScenarios'
// line) and bounded: a cell with more holders excused than stallBudget
// fails (see verdict).
const (
	// stallTick is the probe's sleep: the resolution of a measured stall.
	stallTick = 5 * time.Millisecond
	// stallMin is the shortest oversleep reported as a stall.
	stallMin = 20 * time.Millisecond
	// stallResume is how long after a stall's end a Done it held up may
	// still be observed: the process runs its backlog of goroutines
	// (the hold's deadline timer, then the worker's watcher) after the
	// probe's.
	stallResume = 50 * time.Millisecond
	// stallLead is how long before the next grant a stall must have begun
	// to explain a late Done: the hold's deadline comes at least the
	// safety margin's fixed part (backends.SafetyMargin: TTL/20 for
	// clock drift, plus 50ms) before the server can grant the lock
	// again, and a process that ran at its deadline closed Done then.
	stallLead = 50 * time.Millisecond
)

// stallBudget is how many holders a cell of faults faults may have
// excused by stalls of their own processes (Result.Stalled) and still
// pass: one, or one in eight of its faults if that is more (3 for the
// starvation scenario's 25 or so). At least one, because the excuse
// exists for a loaded machine and must not fail a cell there: the
// rehearsal that made the probe saw one cell need it, once (a Done 67ms
// late, 167ms past its deadline); the committed run before the probe
// (docs/faults/results.json: 232 cells on a 2-core machine at a load of
// up to 14.75) passed every cell without it; two in one cell take two
// long stalls each at a holder's deadline. No more, because each excuse
// is a check that did not run: in a cell of two faults, two excused is
// every fault excused, a run that tested nothing of the lock and must
// not pass as if it had.
func stallBudget(faults int) int { return max(1, faults/8) }

// stallProbe sleeps stallTick at a time until ctx ends, and reports each
// sleep that overran by more than stallMin as an OpStall event of client,
// at the moment it woke, with the overrun as its Stall: a time in which
// the process ran nothing of its own. Each sleep is measured from the
// end of the one before, so a stop that lands between two sleeps (the
// probe's goroutine preempted on a loaded machine) counts too.
func stallProbe(ctx context.Context, em *emitter, client int) {
	probeStalls(ctx, em, client, func() {})
}

// probeStalls is stallProbe, calling armed once it measures: a stall
// after armed returns is reported.
func probeStalls(ctx context.Context, em *emitter, client int, armed func()) {
	t := time.NewTimer(stallTick)
	defer t.Stop()
	from := now()
	armed()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		woke := now()
		if late := time.Duration(woke-from) - stallTick; late > stallMin {
			em.emit(Event{T: woke, Client: client, Op: OpStall, Phase: OK, Stall: int64(late)})
		}
		from = woke
		t.Reset(stallTick)
	}
}

// span is a stretch of time, in now() nanoseconds.
type span struct{ from, to int64 }

// stalls are each client's measured stalls (OpStall events), but for
// those that met a fault which stops the client itself (SIGSTOP: pause,
// acquire-pause): an injected pause is what its scenario measures.
func stallsOf(evs []Event) map[int][]span {
	var injected []struct {
		client int
		span
	}
	for i, f := range evs {
		if f.Op != OpFault || f.Phase != Invoke || (f.Fault != "pause" && f.Fault != "acquire-pause") {
			continue
		}
		end := int64(1<<63 - 1)
		if j := slices.IndexFunc(evs[i+1:], func(e Event) bool {
			return e.Op == OpFault && e.Phase == OK && e.Fault == f.Fault && e.Client == f.Client
		}); j >= 0 {
			end = evs[i+1+j].T
		}
		injected = append(injected, struct {
			client int
			span
		}{f.Client, span{f.T, end}})
	}
	out := map[int][]span{}
	for _, e := range evs {
		if e.Op != OpStall {
			continue
		}
		s := span{e.T - e.Stall - int64(stallTick), e.T}
		if slices.ContainsFunc(injected, func(p struct {
			client int
			span
		}) bool {
			return p.client == e.Client && s.from < p.to && p.from < s.to
		}) {
			continue
		}
		out[e.Client] = append(out[e.Client], s)
	}
	return out
}

// stalledThrough reports whether client's process was measured stalled
// from stallLead before next (another client's grant, which comes the
// safety margin after the hold's deadline: the stall may have begun up to
// TTL/20 after that deadline) until about done (its Done seen closed): it
// ran nothing in that time, so the Done that came due could not close
// before next.
func stalledThrough(stalls map[int][]span, client int, next, done int64) bool {
	return slices.ContainsFunc(stalls[client], func(s span) bool {
		return s.from <= next-int64(stallLead) && s.to >= done-int64(stallResume)
	})
}
