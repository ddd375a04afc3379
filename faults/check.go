package faults

import (
	"fmt"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// Result is what one cell measured.
type Result struct {
	Backend  string  `json:"backend"`
	Scenario int     `json:"scenario"`
	Name     string  `json:"name"`
	Expected Outcome `json:"expected"`
	// Measured is what the run did to the lock's promises (see measure),
	// which Expected bounds; NotMeasured (left out) where nothing ran.
	Measured Measured `json:"measured,omitempty"`
	Verdict  string   `json:"verdict"` // "ok", "n/a", or what went against the expected outcome
	// NotRun says why a cell that applies did not run (n/a): the
	// backend's Capabilities lack its recipe.
	NotRun string `json:"not_run,omitempty"`
	// TTL is each hold's TTL in the run.
	TTL    time.Duration `json:"ttl_ns,omitempty"`
	Faults int           `json:"faults"`
	Ops    int           `json:"ops"` // acquisitions granted
	// Overlaps counts pairs of critical sections of different clients that
	// overlapped in time though they exclude each other (a writer's with
	// anyone's on its name; readers share), and stretches of time with
	// more than Limit permits held; OverlapTime is their total. A client's
	// critical section runs from its grant to its release, or to its Done
	// closing, or to its death, whichever comes first. OverlapMax is the
	// longest single overlap.
	Overlaps    int           `json:"overlaps"`
	OverlapTime time.Duration `json:"overlap_ns"`
	OverlapMax  time.Duration `json:"overlap_max_ns"`
	// Stale writes: writes by a client after another had been granted the
	// lock since its own grant. StaleUnfenced: taken by the plain
	// register. The fenced register's: StaleFencedAccepted, taken although
	// a newer holder had already shown it its token (fencing failed);
	// StaleBeforeContact, taken before any newer holder had (fencing could
	// not have known); StaleFencedRejected, refused.
	StaleUnfenced       int `json:"stale_unfenced"`
	StaleFencedAccepted int `json:"stale_fenced_accepted"`
	StaleBeforeContact  int `json:"stale_before_contact"`
	StaleFencedRejected int `json:"stale_fenced_rejected"`
	// FreshRejected counts current holders' writes the fenced register
	// refused, and TokenOrder grants whose token was not above the one
	// answered before on their name (in answer order; Tokens decides).
	FreshRejected int `json:"fresh_rejected"`
	TokenOrder    int `json:"token_order"`
	// FencedOrder counts the fenced register's accepted writes (and
	// readers' checks) that came out of token order: a token below that
	// of a write it had accepted before, or equal to another client's
	// (two leaders' writes accepted in one term).
	FencedOrder int `json:"fenced_order,omitempty"`
	// Limit is a semaphore cell's limit n; Shared, the most readers or
	// permits held at once on one name (a read-write cell must reach 2,
	// a semaphore cell n).
	Limit  int `json:"limit,omitempty"`
	Shared int `json:"shared,omitempty"`
	// Tokens is porcupine's verdict on the acquires and releases against
	// lockModel (tokens rise in grant order, a successful release is the
	// holder's own): "ok", "illegal" or "unknown"; Visual is the HTML
	// file that shows an illegal history, if one was written.
	Tokens string `json:"tokens"`
	Visual string `json:"visual,omitempty"`
	// Lost updates: writes applied minus the counter's final value.
	LostUnfenced int `json:"lost_unfenced"`
	LostFenced   int `json:"lost_fenced"`
	// LateDone counts losses whose Done closed after another client was
	// granted the lock, LateDoneMax the longest such lateness.
	LateDone    int           `json:"late_done"`
	LateDoneMax time.Duration `json:"late_done_max_ns"`
	// Stalled counts the holders whose late Done their own process
	// explains: it was measured stalled, with no fault of the scenario's
	// stopping it, from at least stallLead before the next client's grant
	// (no later than its deadline's neighbourhood: the grant comes the
	// safety margin after the deadline, so the stall may have begun up to
	// TTL/20 after it) until about its Done (see stallProbe); a multi-lock's names, late in one stall, are one
	// holder. Their late Dones, and the overlaps they made, count here
	// and not in LateDone and Overlaps, and fail no check; more of them
	// than stallBudget fail the cell. StalledMax is the longest lateness.
	Stalled    int           `json:"stalled,omitempty"`
	StalledMax time.Duration `json:"stalled_max_ns,omitempty"`
	// Detect: from a fault's start to the victim's Done (the longest);
	// Recover: from a fault of a client (or the end of a fault of the
	// server) to another client's grant (the longest).
	Detect  time.Duration `json:"detect_ns"`
	Recover time.Duration `json:"recover_ns"`
	Leaks   int           `json:"leaks"`
	// Starvation, measured where the scenario checks it (Scenario.Starve):
	// how many workers were never granted the lock, the fewest grants
	// any worker got, and the longest any waited (see checkStarvation),
	// of Clients workers over Ran (from the first fault to the stop).
	Clients      int           `json:"clients,omitempty"`
	Ran          time.Duration `json:"ran_ns,omitempty"`
	Starved      int           `json:"starved,omitempty"`
	FewestGrants int           `json:"fewest_grants,omitempty"`
	MaxWait      time.Duration `json:"max_wait_ns,omitempty"`
	// Problems are the faults that did not do what the scenario needs
	// (did not bite, no Done, no recovery) and other failed checks.
	Problems []string `json:"problems,omitempty"`
	Err      string   `json:"error,omitempty"`

	// history is the cell's history when its verdict is not ok; lin is
	// porcupine's account of it.
	history []Event
	lin     porcupine.LinearizationInfo
}

// recoverSlack is what a loaded machine may add to a TTL before a crashed
// holder's lock comes free.
const recoverSlack = 5 * time.Second

// check computes a cell's result from its history (sorted by time), the
// resource's final state and the holds' TTL. r.Limit is a semaphore
// cell's limit.
func check(r *Result, evs []Event, st ResourceState, ttl time.Duration) {
	holds := holdsOf(evs)
	r.Ops = len(holds)
	limit := max(r.Limit, 1)
	stalls := stallsOf(evs)
	problem := func(format string, args ...any) { r.Problems = append(r.Problems, fmt.Sprintf(format, args...)) }
	// firstOther is the first grant to a client other than client after t.
	firstOther := func(client int, t int64) *hold {
		for _, h := range holds {
			if h.client != client && h.start > t {
				return h
			}
		}
		return nil
	}
	last := map[string]uint64{}
	for _, h := range holds {
		if t, ok := last[h.name]; ok && h.token <= t {
			r.TokenOrder++
		}
		last[h.name] = h.token
	}
	r.Tokens, r.lin = checkTokens(evs)

	// Faults: what each did, and whether it did what its scenario needs.
	for i, f := range evs {
		if f.Op != OpFault || f.Phase != Invoke {
			continue
		}
		r.Faults++
		n := r.Faults
		end := f.T
		if j := slices.IndexFunc(evs[i+1:], func(e Event) bool {
			return e.Op == OpFault && e.Phase == OK && e.Fault == f.Fault && e.Client == f.Client
		}); j >= 0 {
			end = evs[i+1+j].T
		}
		// Faults of a waiter (token 0) have no hold to aim at.
		victim := holdAt(holds, f.Client, f.Token, f.T)
		if victim == nil && f.Token != 0 {
			problem("fault %d (%s): no hold of client %d with token %d", n, f.Fault, f.Client, f.Token)
			continue
		}
		var next *hold
		var vs []*hold
		if victim != nil {
			vs = acquisition(holds, victim)
			for _, v := range vs {
				v.faulted = true
			}
			if f.Fault == "clock-jump" || f.Fault == "clock-fast" {
				// The server's clock is every hold's: one granted or
				// held while it was wrong may lose its lease early too
				// (a hold granted while the clock ran ten times too
				// fast lost it within a tenth of its TTL).
				for _, h := range holds {
					if h.start <= end && h.end >= f.T {
						h.faulted = true
					}
				}
			}
			next = firstConflict(holds, vs, f.T, limit)
		} else {
			next = firstOther(f.Client, f.T)
		}
		var lost *Event
		if j := slices.IndexFunc(evs, func(e Event) bool {
			return e.Op == OpLost && e.Client == f.Client && e.Token == f.Token
		}); j >= 0 {
			lost = &evs[j]
			r.Detect = max(r.Detect, time.Duration(lost.T-f.T))
		}
		if next == nil {
			problem("fault %d (%s): nobody else was granted the lock", n, f.Fault)
			continue
		}
		switch f.Fault {
		case "server-pause", "leader-pause", "server-restart":
			r.Recover = max(r.Recover, time.Duration(next.start-end))
		default:
			r.Recover = max(r.Recover, time.Duration(next.start-f.T))
		}
		switch f.Fault {
		case "pause":
			if next.start >= victim.end {
				problem("fault %d (pause): did not bite: the next grant came after the paused hold ended", n)
			}
		case "blackhole", "server-pause":
			// Each of the victim's holds (a multi-lock's names) must
			// report its loss before a conflicting grant of its name. A
			// multi-lock whose fault bit (one of its names lost) may
			// keep another name until the heal and release it: that
			// name owes no Done if its next grant came after its hold
			// ended.
			bit := slices.ContainsFunc(vs, func(v *hold) bool {
				return slices.ContainsFunc(evs, func(e Event) bool {
					return e.Op == OpLost && e.Client == v.client && e.Name == v.name && e.Token == v.token
				})
			})
			for _, v := range vs {
				vnext := firstConflict(holds, []*hold{v}, f.T, limit)
				if vnext == nil || (len(vs) > 1 && bit && vnext.start >= v.end) {
					continue
				}
				j := slices.IndexFunc(evs, func(e Event) bool {
					return e.Op == OpLost && e.Client == v.client && e.Name == v.name && e.Token == v.token
				})
				switch {
				case j < 0:
					problem("fault %d (%s): the holder's Done never closed", n, f.Fault)
				case evs[j].T > vnext.start && stalledThrough(stalls, v.client, vnext.start, evs[j].T):
					// Counted in Stalled below.
				case evs[j].T > vnext.start:
					problem("fault %d (%s): the holder's Done closed %v after the next grant", n, f.Fault,
						time.Duration(evs[j].T-vnext.start).Round(time.Millisecond))
				}
			}
		case "clock-jump", "clock-fast":
			// On Redis the lock must fall: its Done closes, or another
			// client gets in first (which comes first is a race).
			if r.Expected == MXorDET && lost == nil && next.start >= victim.end {
				problem("fault %d (%s): did not bite: the holder neither lost the lock nor was overlapped", n, f.Fault)
			}
		case "resource-delay":
			// It bit if the write landed after another client's grant.
			if !slices.ContainsFunc(evs, func(e Event) bool {
				return e.Op == OpApply && e.Client == f.Client && e.Token == f.Token && e.T > next.start
			}) {
				problem("fault %d (resource-delay): did not bite: the delayed write did not land after the next grant", n)
			}
		case "crash":
			if d := time.Duration(next.start - f.T); d > ttl+recoverSlack {
				problem("fault %d (crash): the lock came free after %v, more than the TTL %v", n, d.Round(time.Millisecond), ttl)
			}
		}
	}

	// Losses reported after a conflicting grant: late, or held up by a
	// stall of the holder's process (which marks the hold, so that the
	// overlap it made counts as the stall's too), counted once an
	// acquisition.
	excused := map[[2]int64]bool{}
	for _, e := range evs {
		if e.Op != OpLost {
			continue
		}
		g := holdOf(holds, e.Client, e.Name, e.Token, e.T)
		if g == nil {
			continue
		}
		next := firstConflict(holds, []*hold{g}, g.start, limit)
		switch {
		case next == nil || next.start >= e.T:
		case stalledThrough(stalls, g.client, next.start, e.T):
			g.stalled = true
			if k := [2]int64{int64(g.client), g.start}; !excused[k] {
				excused[k] = true
				r.Stalled++
			}
			r.StalledMax = max(r.StalledMax, time.Duration(e.T-next.start))
		default:
			r.LateDone++
			r.LateDoneMax = max(r.LateDoneMax, time.Duration(e.T-next.start))
		}
	}

	r.overlaps(holds, limit, problem)
	r.writes(evs, holds, limit, problem)
	r.LostUnfenced = int(st.AppliedUnfenced - st.Unfenced)
	r.LostFenced = int(st.AppliedFenced - st.Fenced)
}
