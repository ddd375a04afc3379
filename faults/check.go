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
	// TTL is each hold's TTL in the run.
	TTL    time.Duration `json:"ttl_ns,omitempty"`
	Faults int           `json:"faults"`
	Ops    int           `json:"ops"` // acquisitions granted
	// Overlaps counts pairs of critical sections of different clients that
	// overlapped in time; OverlapTime is their total overlap. A client's
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
	// answered before (in answer order; Tokens decides).
	FreshRejected int `json:"fresh_rejected"`
	TokenOrder    int `json:"token_order"`
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
	// Detect: from a fault's start to the victim's Done (the longest);
	// Recover: from a fault of a client (or the end of a fault of the
	// server) to another client's grant (the longest).
	Detect  time.Duration `json:"detect_ns"`
	Recover time.Duration `json:"recover_ns"`
	Leaks   int           `json:"leaks"`
	// Problems are the faults that did not do what the scenario needs
	// (did not bite, no Done, no recovery) and other failed checks.
	Problems []string `json:"problems,omitempty"`
	Err      string   `json:"error,omitempty"`

	// history is the cell's history when its verdict is not ok; lin is
	// porcupine's account of it.
	history []Event
	lin     porcupine.LinearizationInfo
}

// hold is one client's critical section.
type hold struct {
	client     int
	token      uint64
	start, end int64
	faulted    bool // the hold a fault was aimed at
}

// recoverSlack is what a loaded machine may add to a TTL before a crashed
// holder's lock comes free.
const recoverSlack = 5 * time.Second

// check computes a cell's result from its history (sorted by time), the
// resource's final state and the holds' TTL.
func check(r *Result, evs []Event, st ResourceState, ttl time.Duration) {
	endOfRun := int64(0)
	if len(evs) > 0 {
		endOfRun = evs[len(evs)-1].T
	}
	var holds []*hold
	open := map[int]*hold{}
	closeHold := func(client int, t int64) {
		if h := open[client]; h != nil {
			h.end = t
			delete(open, client)
		}
	}
	for _, e := range evs {
		switch {
		case e.Op == OpAcquire && e.Phase == OK:
			closeHold(e.Client, e.T)
			h := &hold{client: e.Client, token: e.Token, start: e.T, end: endOfRun}
			holds = append(holds, h)
			open[e.Client] = h
			r.Ops++
		case e.Op == OpRelease && e.Phase == Invoke, e.Op == OpExit:
			closeHold(e.Client, e.T)
		case e.Op == OpLost:
			if h := open[e.Client]; h != nil && h.token == e.Token {
				closeHold(e.Client, e.T)
			}
		}
	}
	holdOf := func(client int, token uint64) *hold {
		for _, h := range holds {
			if h.client == client && h.token == token {
				return h
			}
		}
		return nil
	}
	// firstOther is the first grant to a client other than client after t.
	firstOther := func(client int, t int64) *hold {
		for _, h := range holds {
			if h.client != client && h.start > t {
				return h
			}
		}
		return nil
	}
	for i := 1; i < len(holds); i++ {
		if holds[i].token <= holds[i-1].token {
			r.TokenOrder++
		}
	}
	r.Tokens, r.lin = checkTokens(evs)

	// Faults: what each did, and whether it did what its scenario needs.
	problem := func(format string, args ...any) { r.Problems = append(r.Problems, fmt.Sprintf(format, args...)) }
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
		victim := holdOf(f.Client, f.Token)
		if victim == nil && f.Token != 0 {
			problem("fault %d (%s): no hold of client %d with token %d", n, f.Fault, f.Client, f.Token)
			continue
		}
		if victim != nil {
			victim.faulted = true
		}
		next := firstOther(f.Client, f.T)
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
			switch {
			case lost == nil:
				problem("fault %d (%s): the holder's Done never closed", n, f.Fault)
			case lost.T > next.start:
				problem("fault %d (%s): the holder's Done closed %v after the next grant", n, f.Fault,
					time.Duration(lost.T-next.start).Round(time.Millisecond))
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

	// Overlaps. With an expected MX, those of a faulted hold are the point.
	for i, a := range holds {
		for _, b := range holds[i+1:] {
			if a.client == b.client {
				continue
			}
			if lo, hi := max(a.start, b.start), min(a.end, b.end); lo < hi {
				r.Overlaps++
				r.OverlapTime += time.Duration(hi - lo)
				r.OverlapMax = max(r.OverlapMax, time.Duration(hi-lo))
				if !r.Expected.overlapAllowed(a.faulted || b.faulted) {
					problem("clients %d (token %d) and %d (token %d) held at once for %v",
						a.client, a.token, b.client, b.token, time.Duration(hi-lo).Round(time.Millisecond))
				}
			}
		}
	}

	// Writes.
	grantedSince := func(client int, t0, t int64) bool {
		for _, h := range holds {
			if h.client != client && h.start > t0 && h.start < t {
				return true
			}
		}
		return false
	}
	// contacted reports whether a client granted after t0 had shown the
	// resource its token before t.
	contacted := func(client int, t0, t int64) bool {
		for _, e := range evs {
			if e.T >= t {
				break
			}
			if e.Op == OpSeen && e.Client != client {
				if h := holdOf(e.Client, e.Token); h != nil && h.start > t0 {
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
		g := holdOf(e.Client, e.Token)
		stale := g != nil && grantedSince(e.Client, g.start, e.T)
		accepted := e.Accepted != nil && *e.Accepted
		switch {
		case e.Register == "unfenced" && stale:
			r.StaleUnfenced++
		case e.Register == "fenced" && stale && accepted && contacted(e.Client, g.start, e.T):
			r.StaleFencedAccepted++
		case e.Register == "fenced" && stale && accepted:
			r.StaleBeforeContact++
		case e.Register == "fenced" && stale:
			r.StaleFencedRejected++
		case e.Register == "fenced" && !accepted:
			r.FreshRejected++
		}
	}
	r.LostUnfenced = int(st.AppliedUnfenced - st.Unfenced)
	r.LostFenced = int(st.AppliedFenced - st.Fenced)

	// Losses reported after someone else's grant.
	for _, e := range evs {
		if e.Op != OpLost {
			continue
		}
		g := holdOf(e.Client, e.Token)
		if g == nil {
			continue
		}
		if next := firstOther(e.Client, g.start); next != nil && next.start < e.T {
			r.LateDone++
			r.LateDoneMax = max(r.LateDoneMax, time.Duration(e.T-next.start))
		}
	}
}
