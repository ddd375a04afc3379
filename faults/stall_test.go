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
		case c.stalled && (r.Stalled != 1 || r.LateDone != 0 || r.Overlaps != 0 || strings.Contains(v, "after the next grant")):
			t.Errorf("%s: stalled %d, late Done %d, overlaps %d, verdict %q; want it counted as stalled only", c.name, r.Stalled, r.LateDone, r.Overlaps, v)
		case !c.stalled && (r.Stalled != 0 || r.LateDone != 1 || r.Overlaps != 1 || !strings.Contains(v, "67ms after the next grant")):
			t.Errorf("%s: stalled %d, late Done %d, overlaps %d, verdict %q; want a late Done and an overlap", c.name, r.Stalled, r.LateDone, r.Overlaps, v)
		}
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
