package padlock

import (
	"testing"
	"time"

	"github.com/padlock-go/padlock/backends"
)

// follower is a driver hold that names the hold it followed.
type follower struct {
	backends.Hold
	prev uint64
}

func (f follower) Follows() (uint64, bool) { return f.prev, f.prev > 0 }

// records collects what the bookkeeping returns for the metric.
type records []time.Duration

func (r *records) add(d time.Duration, ok bool) {
	if ok {
		*r = append(*r, d)
	}
}

// after returns the first reading of the clock past t.
func after(t time.Time) time.Time {
	for {
		if now := time.Now(); now.After(t) {
			return now
		}
	}
}

// The hand-off bookkeeping records a hand-off only from a release the
// server confirmed, sent while the waiter waited and before its grant, to
// the grant that directly followed it (backends.Successor), once,
// whichever of the grant and the confirmation comes first; and no entry
// outlives the waits and the release it is for.
func TestHandoffsRecordOnlyConfirmedDirectHandoffs(t *testing.T) {
	const tok = 7
	soon := func() time.Time { return time.Now().Add(time.Millisecond) } // a grant after the release
	for _, c := range []struct {
		name string
		want bool
		run  func(hs *handoffs, r *records)
	}{
		{"confirmed, then granted", true, func(hs *handoffs, r *records) {
			since := hs.wait("n")
			hs.releasing("n", tok)
			r.add(hs.released("n", tok, true))
			r.add(hs.granted("n", since, soon(), follower{prev: tok}))
		}},
		{"granted, then confirmed", true, func(hs *handoffs, r *records) {
			since := hs.wait("n")
			hs.releasing("n", tok)
			r.add(hs.granted("n", since, soon(), follower{prev: tok}))
			if len(*r) != 0 {
				t.Error("recorded before the release was confirmed")
			}
			r.add(hs.released("n", tok, true))
		}},
		// The waiter, granted before the release's answer came back,
		// releases in turn before it does.
		{"next release before the confirmation", true, func(hs *handoffs, r *records) {
			since := hs.wait("n")
			hs.releasing("n", tok)
			r.add(hs.granted("n", since, soon(), follower{prev: tok}))
			hs.releasing("n", tok+1)
			r.add(hs.released("n", tok+1, true))
			r.add(hs.released("n", tok, true))
		}},
		// The hold was gone already (force-released, run out): the
		// waiter followed it, but not on this release.
		{"release refused", false, func(hs *handoffs, r *records) {
			since := hs.wait("n")
			hs.releasing("n", tok)
			r.add(hs.granted("n", since, soon(), follower{prev: tok}))
			r.add(hs.released("n", tok, false))
		}},
		{"granted before the release was sent", false, func(hs *handoffs, r *records) {
			since := hs.wait("n")
			hs.releasing("n", tok)
			r.add(hs.released("n", tok, true))
			r.add(hs.granted("n", since, since, follower{prev: tok}))
		}},
		{"another hold between", false, func(hs *handoffs, r *records) {
			since := hs.wait("n")
			hs.releasing("n", tok)
			r.add(hs.released("n", tok, true))
			r.add(hs.granted("n", since, soon(), follower{prev: tok + 1}))
		}},
		// A stale grant given back, or a wait that failed: no hold kept.
		{"no grant kept", false, func(hs *handoffs, r *records) {
			since := hs.wait("n")
			hs.releasing("n", tok)
			r.add(hs.released("n", tok, true))
			r.add(hs.granted("n", since, soon(), nil))
		}},
		{"released before the wait began", false, func(hs *handoffs, r *records) {
			earlier := hs.wait("n") // a waiter that keeps the name tracked
			hs.releasing("n", tok)
			r.add(hs.released("n", tok, true))
			after(hs.names["n"].at)
			since := hs.wait("n")
			r.add(hs.granted("n", since, soon(), follower{prev: tok}))
			r.add(hs.granted("n", earlier, soon(), nil))
		}},
		{"no waiter at the release", false, func(hs *handoffs, r *records) {
			hs.releasing("n", tok)
			r.add(hs.released("n", tok, true))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var hs handoffs
			var r records
			c.run(&hs, &r)
			switch {
			case c.want && (len(r) != 1 || r[0] <= 0):
				t.Errorf("recorded %v, want one positive hand-off", r)
			case !c.want && len(r) != 0:
				t.Errorf("recorded %v, want none", r)
			}
			if len(hs.names) != 0 {
				t.Errorf("entries left after the waits and the release: %v", hs.names)
			}
		})
	}
}
