package faults

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Result is what one cell measured.
type Result struct {
	Backend  string  `json:"backend"`
	Scenario int     `json:"scenario"`
	Name     string  `json:"name"`
	Expected Outcome `json:"expected"`
	Verdict  string  `json:"verdict"` // "ok", or what went against the expected outcome
	Faults   int     `json:"faults"`
	Ops      int     `json:"ops"` // acquisitions granted
	// Overlaps counts pairs of critical sections of different clients that
	// overlapped in time; OverlapTime is their total overlap. A client's
	// critical section runs from its grant to its release, or to its Done
	// closing, or to its death, whichever comes first.
	Overlaps    int           `json:"overlaps"`
	OverlapTime time.Duration `json:"overlap_ns"`
	// Stale writes: writes by a client after another had been granted the
	// lock since its own grant. Unfenced: accepted by the plain register;
	// fenced: accepted or rejected by the token-checking one.
	StaleUnfenced       int `json:"stale_unfenced"`
	StaleFencedAccepted int `json:"stale_fenced_accepted"`
	StaleFencedRejected int `json:"stale_fenced_rejected"`
	// FreshRejected counts current holders' writes the fenced register
	// refused: a token below one seen before (tokens not monotonic).
	FreshRejected int `json:"fresh_rejected"`
	// Lost updates: writes applied minus the counter's final value.
	LostUnfenced int `json:"lost_unfenced"`
	LostFenced   int `json:"lost_fenced"`
	// LateDone counts losses whose Done closed after another client was
	// granted the lock.
	LateDone int `json:"late_done"`
	// Detect: from each fault's start to the victim's Done (the longest);
	// Recover: from each fault's end (a crash's start) to the next grant
	// (the longest).
	Detect  time.Duration `json:"detect_ns"`
	Recover time.Duration `json:"recover_ns"`
	Leaks   int           `json:"leaks"`
	Err     string        `json:"error,omitempty"`

	// history is the cell's history when its verdict is not ok.
	history []Event
}

// hold is one client's critical section.
type hold struct {
	client     int
	token      uint64
	start, end int64
	grantIdx   int // index of the grant in the sorted history
}

// check computes a cell's result from its history (sorted by time) and
// the resource's final state.
func check(r *Result, evs []Event, st ResourceState) {
	endOfRun := int64(0)
	if len(evs) > 0 {
		endOfRun = evs[len(evs)-1].T
	}
	// Critical sections.
	var holds []*hold
	open := map[int]*hold{}
	closeHold := func(client int, t int64) {
		if h := open[client]; h != nil {
			h.end = t
			delete(open, client)
		}
	}
	for i, e := range evs {
		switch {
		case e.Op == OpAcquire && e.Phase == OK:
			closeHold(e.Client, e.T)
			h := &hold{client: e.Client, token: e.Token, start: e.T, end: endOfRun, grantIdx: i}
			holds = append(holds, h)
			open[e.Client] = h
			r.Ops++
		case e.Op == OpRelease && e.Phase == Invoke, e.Op == OpExit:
			closeHold(e.Client, e.T)
		case e.Op == OpLost:
			if h := open[e.Client]; h != nil && h.token == e.Token {
				closeHold(e.Client, e.T)
			}
		case e.Op == OpFault && e.Phase == Invoke:
			r.Faults++
		}
	}
	for i, a := range holds {
		for _, b := range holds[i+1:] {
			if a.client == b.client {
				continue
			}
			if lo, hi := max(a.start, b.start), min(a.end, b.end); lo < hi {
				r.Overlaps++
				r.OverlapTime += time.Duration(hi - lo)
			}
		}
	}
	// grantedSince reports whether a client other than client was granted
	// the lock after t0 and before t.
	grantedSince := func(client int, t0, t int64) bool {
		for _, h := range holds {
			if h.client != client && h.start > t0 && h.start < t {
				return true
			}
		}
		return false
	}
	// The grant each client's writes belong to: its latest before the write.
	lastGrant := func(client int, t int64) *hold {
		var g *hold
		for _, h := range holds {
			if h.client == client && h.start <= t {
				g = h
			}
		}
		return g
	}
	for _, e := range evs {
		if e.Op != OpApply {
			continue
		}
		g := lastGrant(e.Client, e.T)
		stale := g != nil && grantedSince(e.Client, g.start, e.T)
		accepted := e.Accepted != nil && *e.Accepted
		switch {
		case e.Register == "unfenced" && stale:
			r.StaleUnfenced++
		case e.Register == "fenced" && stale && accepted:
			r.StaleFencedAccepted++
		case e.Register == "fenced" && stale:
			r.StaleFencedRejected++
		case e.Register == "fenced" && !accepted:
			r.FreshRejected++
		}
	}
	r.LostUnfenced = int(st.AppliedUnfenced - st.Unfenced)
	r.LostFenced = int(st.AppliedFenced - st.Fenced)

	// Done before the next grant, and detection times.
	for _, e := range evs {
		if e.Op != OpLost {
			continue
		}
		g := lastGrant(e.Client, e.T)
		if g != nil && g.token == e.Token && grantedSince(e.Client, g.start, e.T) {
			r.LateDone++
		}
	}
	for i, e := range evs {
		if e.Op != OpFault {
			continue
		}
		rest := evs[i+1:]
		victim := e.Client
		switch {
		case e.Phase == Invoke:
			// Detection: the victim's Done, or for a fault of the server
			// (victim 0) any client's.
			if j := slices.IndexFunc(rest, func(x Event) bool {
				return x.Op == OpLost && (x.Client == victim || victim <= 0)
			}); j >= 0 {
				r.Detect = max(r.Detect, time.Duration(rest[j].T-e.T))
			}
			if victim > 0 {
				// A fault of one client: the lock is back when another
				// client is granted it.
				if j := slices.IndexFunc(rest, func(x Event) bool {
					return x.Op == OpAcquire && x.Phase == OK && x.Client != victim
				}); j >= 0 {
					r.Recover = max(r.Recover, time.Duration(rest[j].T-e.T))
				}
			}
		case e.Phase == OK && victim <= 0:
			// A fault of the server: the lock is back at the next grant
			// after it heals.
			if j := slices.IndexFunc(rest, func(x Event) bool { return x.Op == OpAcquire && x.Phase == OK }); j >= 0 {
				r.Recover = max(r.Recover, time.Duration(rest[j].T-e.T))
			}
		}
	}
}

// verdict compares a result with its expected outcome: "ok", or what
// went against it.
func verdict(r *Result, monotonic bool) string {
	if r.Expected == NA {
		return "n/a"
	}
	var bad []string
	if r.Err != "" {
		bad = append(bad, "error: "+r.Err)
	}
	if r.Faults == 0 {
		bad = append(bad, "no fault injected")
	}
	if r.Leaks > 0 {
		bad = append(bad, fmt.Sprintf("%d holders left behind", r.Leaks))
	}
	if monotonic && r.StaleFencedAccepted > 0 {
		bad = append(bad, fmt.Sprintf("fencing let %d stale writes through", r.StaleFencedAccepted))
	}
	if monotonic && r.LostFenced > 0 {
		bad = append(bad, fmt.Sprintf("%d updates lost despite fencing", r.LostFenced))
	}
	if monotonic && r.FreshRejected > 0 {
		bad = append(bad, fmt.Sprintf("%d writes of current holders refused: tokens out of grant order", r.FreshRejected))
	}
	switch r.Expected {
	case MX:
		if r.Overlaps == 0 {
			bad = append(bad, "no overlap: the fault did not bite")
		}
	default: // SAFE, DET, UNAV
		if r.Overlaps > 0 {
			bad = append(bad, fmt.Sprintf("%d overlapping critical sections", r.Overlaps))
		}
		if r.LateDone > 0 {
			bad = append(bad, fmt.Sprintf("%d losses reported after the next grant", r.LateDone))
		}
	}
	if len(bad) == 0 {
		return "ok"
	}
	return strings.Join(bad, "; ")
}
