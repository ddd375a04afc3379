package faults

import (
	"encoding/json"
	"strings"
	"testing"
)

// A cell fails when what it measured moves away from its expectation in
// either direction: an UNSAFE or MX cell that came out safe no longer
// bites, and an MX cell whose fencing broke went further than expected.
// (Before, UNSAFE and MX cells failed only on errors and leaks.)
func TestVerdictOutcomeMoved(t *testing.T) {
	clean := Result{Faults: 2, Ops: 10, Tokens: "ok"}
	with := func(expected Outcome, f func(*Result)) *Result {
		r := clean
		r.Expected = expected
		if f != nil {
			f(&r)
		}
		return &r
	}
	overlap := func(r *Result) { r.Overlaps, r.StaleUnfenced, r.StaleFencedRejected = 2, 2, 2 }
	stale := func(r *Result) { r.StaleUnfenced, r.StaleFencedRejected = 2, 2 }
	forgot := func(r *Result) { r.FreshRejected, r.TokenOrder, r.Tokens = 3, 4, "illegal" }
	for _, c := range []struct {
		name      string
		r         *Result
		monotonic bool
		want      string // "" for ok
	}{
		{"UNSAFE turned safe", with(UNSAFE, nil), true, "stopped biting"},
		{"UNSAFE that only overlapped: the tokens survived", with(UNSAFE, overlap), true, "stopped biting"},
		{"UNSAFE as expected: the server forgot the tokens", with(UNSAFE, forgot), true, ""},
		{"UNSAFE without monotonic tokens turned safe", with(UNSAFE, nil), false, "stopped biting"},
		{"UNSAFE without monotonic tokens, overlapping", with(UNSAFE, overlap), false, ""},
		{"MX turned safe", with(MX, nil), true, "stopped biting"},
		{"MX with stale writes", with(MX, stale), true, ""},
		{"MX with an overlap", with(MX, overlap), true, ""},
		{"MX whose fencing broke", with(MX, forgot), true, "more than MX allows"},
		{"SAFE that overlapped", with(SAFE, overlap), true, "more than SAFE allows"},
		{"SAFE with stale writes from a holder told first", with(SAFE, stale), true, ""},
		{"DET safe", with(DET, nil), true, ""},
	} {
		v := verdict(c.r, c.monotonic)
		if c.want == "" && v != "ok" || c.want != "" && !strings.Contains(v, c.want) {
			t.Errorf("%s: verdict %q, want %q", c.name, v, c.want)
		}
	}
}

// The outcomes that depend on a race allow either side of it, and no
// more: a clock fault on Redis may or may not let another client in
// before the holder's Done, but never breaks fencing; RedLock's bare
// majority may or may not overlap, only on the faulted hold.
func TestVerdictRaces(t *testing.T) {
	for _, c := range []struct {
		name      string
		r         Result
		monotonic bool
		want      Measured
		verdict   string
	}{
		{"MX or DET: Done first", Result{Expected: MXorDET}, true, Safe, "ok"},
		{"MX or DET: overlap", Result{Expected: MXorDET, Overlaps: 1}, true, Overlap, "ok"},
		{"MX or DET: fencing broke", Result{Expected: MXorDET, Overlaps: 1, StaleFencedAccepted: 1}, true, FencingBroke, "more than MX or DET allows"},
		{"UNSAFE or SAFE: safe", Result{Expected: UNSAFEorSAFE}, false, Safe, "ok"},
		{"UNSAFE or SAFE: overlap, tokens anyhow", Result{Expected: UNSAFEorSAFE, Overlaps: 1, Tokens: "illegal", StaleFencedAccepted: 1}, false, Overlap, "ok"},
	} {
		r := c.r
		r.Faults, r.Ops = 2, 10
		if r.Tokens == "" {
			r.Tokens = "ok"
		}
		v := verdict(&r, c.monotonic)
		if r.Measured != c.want || !strings.Contains(v, c.verdict) {
			t.Errorf("%s: measured %s, verdict %q; want %s, %q", c.name, r.Measured, v, c.want, c.verdict)
		}
	}

	// On the history: an overlap of the faulted hold is what UNSAFE or
	// SAFE allows; one between two holds no fault touched is a bug.
	grant := func(t int64, c int, tok uint64) Event {
		return Event{T: t, Client: c, Op: OpAcquire, Phase: OK, Token: tok}
	}
	rel := func(t int64, c int, tok uint64) Event {
		return Event{T: t, Client: c, Op: OpRelease, Phase: Invoke, Token: tok}
	}
	fault := func(t int64, c int, tok uint64, phase string) Event {
		return Event{T: t, Client: c, Token: tok, Op: OpFault, Phase: phase, Fault: "clock-jump"}
	}
	faulted := []Event{grant(1, 1, 5), fault(2, 1, 5, Invoke), grant(3, 2, 6), fault(4, 1, 5, OK), rel(5, 1, 5), rel(6, 2, 6)}
	unfaulted := []Event{grant(1, 1, 5), fault(2, 1, 5, Invoke), fault(3, 1, 5, OK), rel(4, 1, 5),
		grant(10, 2, 6), grant(11, 3, 7), rel(12, 2, 6), rel(13, 3, 7)}
	for _, c := range []struct {
		name string
		evs  []Event
		want string
	}{{"faulted", faulted, ""}, {"unfaulted", unfaulted, "held at once"}} {
		r := Result{Expected: UNSAFEorSAFE}
		check(&r, c.evs, ResourceState{}, 0)
		v := verdict(&r, false)
		if c.want == "" && v != "ok" || c.want != "" && !strings.Contains(v, c.want) {
			t.Errorf("UNSAFE or SAFE, %s overlap: verdict %q, want %q", c.name, v, c.want)
		}
	}
}

// A clock fault is the server's, not only the victim's: a hold granted
// while the server's clock ran fast may lose its lease early and be
// overlapped by the next grant, which MX or DET allows; a hold granted
// after the clock healed may not.
func TestClockFaultTouchesEveryHold(t *testing.T) {
	ev := func(t int64, c int, op, phase string, tok uint64) Event {
		return Event{T: t, Client: c, Op: op, Phase: phase, Token: tok}
	}
	fault := func(t int64, phase string) Event {
		return Event{T: t, Client: 1, Token: 5, Op: OpFault, Phase: phase, Fault: "clock-fast"}
	}
	lost := Event{T: 4, Client: 1, Op: OpLost, Phase: OK, Token: 5}
	during := []Event{ev(1, 1, OpAcquire, OK, 5), fault(2, Invoke), ev(3, 2, OpAcquire, OK, 6), lost,
		fault(5, OK), ev(6, 3, OpAcquire, OK, 7), ev(7, 2, OpRelease, Invoke, 6), ev(8, 3, OpRelease, Invoke, 7)}
	after := []Event{ev(1, 1, OpAcquire, OK, 5), fault(2, Invoke), ev(3, 2, OpAcquire, OK, 6), lost,
		fault(5, OK), ev(7, 2, OpRelease, Invoke, 6), ev(10, 3, OpAcquire, OK, 7), ev(11, 4, OpAcquire, OK, 8),
		ev(12, 3, OpRelease, Invoke, 7), ev(13, 4, OpRelease, Invoke, 8)}
	for _, c := range []struct {
		name string
		evs  []Event
		want string
	}{{"granted while the clock ran fast", during, ""}, {"granted after it healed", after, "held at once"}} {
		r := Result{Expected: MXorDET}
		check(&r, c.evs, ResourceState{}, 0)
		v := verdict(&r, false)
		if c.want == "" && strings.Contains(v, "held at once") || c.want != "" && !strings.Contains(v, c.want) {
			t.Errorf("MX or DET, an overlap of a hold %s: verdict %q, want %q", c.name, v, c.want)
		}
	}
}

// results.json records a measured outcome by name.
func TestMeasuredJSON(t *testing.T) {
	for m := Safe; m <= FencingBroke; m++ {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var back Measured
		if err := json.Unmarshal(b, &back); err != nil || back != m {
			t.Errorf("%s: %s read back as %v, %v", m, b, back, err)
		}
	}
	var m Measured
	for _, bad := range []string{`"lost"`, `""`} {
		if err := json.Unmarshal([]byte(bad), &m); err == nil || !strings.Contains(err.Error(), bad[1:len(bad)-1]) {
			t.Errorf("an unknown measured outcome %s: %v", bad, err)
		}
	}
	// A run that did not run records no measured outcome.
	if b, err := json.Marshal(Result{Expected: NA, Verdict: "n/a"}); err != nil || strings.Contains(string(b), "measured") {
		t.Errorf("an n/a result: %s, %v", b, err)
	}
}
