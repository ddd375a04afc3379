package faults

import (
	"cmp"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A cut-off holder whose Done closed 67ms after the next grant: a late
// Done and an overlap, unless its process was measured stalled from
// before its deadline (50ms before that grant) until about its Done; a
// stall that began later or ended well before the Done, or one inside a
// pause the scenario injected, explains nothing.
func TestCheckStalledHolder(t *testing.T) {
	ms := int64(time.Millisecond)
	fault := func(at int64, kind, phase string) Event {
		return Event{T: at * ms, Client: 1, Token: 5, Op: OpFault, Phase: phase, Fault: kind}
	}
	stall := func(at, d int64) Event {
		return Event{T: at * ms, Client: 1, Op: OpStall, Phase: OK, Stall: d * ms}
	}
	base := []Event{grantOf(0, 1, Writer, "", 5), fault(100, "blackhole", Invoke), grantOf(1000*ms, 2, Writer, "", 6),
		{T: 1067 * ms, Client: 1, Op: OpLost, Phase: OK, Token: 5}, releaseOf(1200*ms, 2, Writer, "", 6), fault(2100, "blackhole", OK),
		releaseOf(2200*ms, 1, Writer, "", 5)}
	with := func(extra ...Event) []Event {
		evs := append(append([]Event{}, base...), extra...)
		slices.SortStableFunc(evs, func(a, b Event) int { return cmp.Compare(a.T, b.T) })
		return evs
	}
	for _, c := range []struct {
		name    string
		evs     []Event
		stalled bool
	}{
		{"no stall", with(), false},
		{"stalled through the grant until the Done", with(stall(1060, 200)), true},
		{"a stall that ended before the Done was due to show", with(stall(990, 200)), false},
		{"a stall that began after the grant", with(stall(1060, 40)), false},
		{"a stall that began after the deadline, just before the grant", with(stall(1060, 90)), false},
		{"a stall inside an injected pause", with(stall(1060, 200), fault(800, "pause", Invoke), fault(1100, "pause", OK)), false},
	} {
		r := Result{Expected: DET}
		check(&r, c.evs, ResourceState{}, time.Second)
		v := verdict(&r, true)
		switch {
		case c.stalled && (r.Stalled != 1 || r.LateDone != 0 || r.Overlaps != 0 || v != "ok"):
			t.Errorf("%s: stalled %d, late Done %d, overlaps %d, verdict %q; want it counted as stalled only, within the cell's budget", c.name, r.Stalled, r.LateDone, r.Overlaps, v)
		case !c.stalled && (r.Stalled != 0 || r.LateDone != 1 || r.Overlaps != 1 || !strings.Contains(v, "67ms after the next grant")):
			t.Errorf("%s: stalled %d, late Done %d, overlaps %d, verdict %q; want a late Done and an overlap", c.name, r.Stalled, r.LateDone, r.Overlaps, v)
		}
	}
}

// A stall excuses a late Done, visibly and within a budget: one holder a
// cell, or one in eight of its faults if that is more. A cell with more
// holders excused fails (the machine ran too little of its workers for
// the run to test the lock), whatever its expected outcome.
func TestVerdictStallBudget(t *testing.T) {
	for _, c := range []struct {
		faults, stalled int
		want            string // "" for ok
	}{
		{2, 0, ""}, {2, 1, ""}, {2, 2, "2 holders' late Dones excused by stalls of their own processes"},
		{1, 1, ""}, {25, 3, ""}, {25, 4, "more than the 3 a cell of 25 faults allows"},
	} {
		for _, o := range []Outcome{DET, MX, UNSAFE} {
			r := Result{Expected: o, Faults: c.faults, Ops: 10, Tokens: "ok", Stalled: c.stalled, StalledMax: 80 * time.Millisecond}
			switch o { // what each outcome needs measured, besides
			case MX:
				r.StaleUnfenced = 1
			case UNSAFE:
				r.FreshRejected = 1
			}
			v := verdict(&r, true)
			if c.want == "" && v != "ok" || c.want != "" && !strings.Contains(v, c.want) {
				t.Errorf("%s, %d faults, %d holders stalled: verdict %q, want %q", o, c.faults, c.stalled, v, c.want)
			}
		}
	}

	// padlock faults' table shows them beside the late Dones.
	var table strings.Builder
	if err := WriteTable(&table, []Result{{Backend: "etcd", Scenario: 4, Name: "holder-cut-off", Expected: DET, Faults: 2,
		LateDone: 0, Stalled: 1, Verdict: "ok"}}); err != nil || !strings.Contains(table.String(), "0 (+1 stalled)") {
		t.Errorf("the table hides a stalled holder (%v):\n%s", err, table.String())
	}

	// A multi-lock's two names, lost late in one stall of its process,
	// are one holder stalled.
	ms := int64(time.Millisecond)
	fault := func(at int64, phase string) Event {
		return Event{T: at * ms, Client: 1, Token: 5, Op: OpFault, Phase: phase, Fault: "blackhole"}
	}
	lost := func(name string) Event {
		return Event{T: 1067 * ms, Client: 1, Op: OpLost, Phase: OK, Token: 5, Kind: Multi, Name: name}
	}
	evs := []Event{grantOf(0, 1, Multi, "hot-a", 5), grantOf(0, 1, Multi, "hot-b", 5), fault(100, Invoke),
		grantOf(1000*ms, 2, Multi, "hot-a", 6), grantOf(1001*ms, 3, Multi, "hot-b", 7), lost("hot-a"), lost("hot-b"),
		{T: 1100 * ms, Client: 1, Op: OpStall, Phase: OK, Stall: 200 * ms},
		releaseOf(1200*ms, 2, Multi, "hot-a", 6), releaseOf(1200*ms, 3, Multi, "hot-b", 7), fault(2100, OK)}
	r := Result{Expected: DET}
	check(&r, evs, ResourceState{}, time.Second)
	if v := verdict(&r, true); r.Stalled != 1 || r.LateDone != 0 || r.Overlaps != 0 || v != "ok" {
		t.Errorf("a multi-lock's two names late in one stall: stalled %d, late Done %d, overlaps %d, verdict %q; want one holder stalled, ok",
			r.Stalled, r.LateDone, r.Overlaps, v)
	}
}

// The probe reports a stall of its own process: the test process is
// stopped (SIGSTOP) for 300ms by a shell it starts once the probe
// measures, which then resumes it.
func TestStallProbe(t *testing.T) {
	r, w := io.Pipe()
	em := newEmitter(w)
	ctx, cancel := context.WithCancel(context.Background())
	probed, armed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(probed)
		probeStalls(ctx, em, 7, func() { close(armed) })
	}()
	<-armed
	stalls := make(chan Event, 16)
	go func() {
		dec := json.NewDecoder(r)
		for {
			var e Event
			if dec.Decode(&e) != nil {
				close(stalls)
				return
			}
			stalls <- e
		}
	}()
	pid := strconv.Itoa(os.Getpid())
	sh := exec.Command("sh", "-c", "kill -STOP "+pid+"; sleep 0.3; kill -CONT "+pid)
	if err := sh.Run(); err != nil {
		t.Fatalf("stop and resume the test process: %v", err)
	}
	var longest time.Duration
	deadline := time.After(time.Minute)
	for longest < 250*time.Millisecond {
		select {
		case e := <-stalls:
			if e.Op != OpStall || e.Client != 7 {
				t.Fatalf("the probe reported %+v", e)
			}
			longest = max(longest, time.Duration(e.Stall))
		case <-deadline:
			t.Fatalf("no stall of 250ms or more reported after a 300ms stop (longest %v)", longest)
		}
	}
	cancel()
	<-probed
	w.Close()
	for range stalls {
	}
}
