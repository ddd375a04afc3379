package faults

import (
	"strings"
	"testing"
	"time"
)

// TestStarvation checks the starvation rule on synthetic histories: a
// client that is never granted the lock is starved, a retry after a
// failed attempt goes on with the same wait, and a wait still open at the
// client's exit counts up to it.
func TestStarvation(t *testing.T) {
	ms := func(n int) int64 { return int64(n) * int64(time.Millisecond) }
	acq := func(at, client int, phase string) Event {
		return Event{T: ms(at), Client: client, Op: OpAcquire, Phase: phase}
	}
	exit := func(at, client int) Event { return Event{T: ms(at), Client: client, Op: OpExit, Phase: OK} }
	evs := []Event{
		acq(0, 1, Invoke), acq(0, 2, Invoke), acq(0, 3, Invoke),
		acq(10, 1, OK),
		acq(100, 2, Fail), acq(110, 2, Invoke), // a timed-out attempt, tried again
		acq(200, 1, Invoke),
		acq(300, 2, OK), // waited 300ms, across the retry
		acq(400, 1, OK),
		acq(450, 2, Invoke),
		exit(1000, 1), exit(1000, 2), exit(1000, 3), // 2 waits 550ms, 3 never granted
	}
	var r Result
	starvation(&r, evs, []int{1, 2, 3}, 0)
	if r.Starved != 1 || r.FewestGrants != 0 || r.MaxWait != time.Second {
		t.Errorf("starved %d, fewest grants %d, max wait %v; want 1, 0, 1s (client 3 waited the whole run)", r.Starved, r.FewestGrants, r.MaxWait)
	}
	if len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "clients [3]") {
		t.Errorf("problems %q, want one naming client 3", r.Problems)
	}

	r = Result{}
	starvation(&r, evs, []int{1, 2}, 0) // client 3 left out (replaced)
	if r.Starved != 0 || r.FewestGrants != 1 || r.MaxWait != 550*time.Millisecond || len(r.Problems) != 0 {
		t.Errorf("starved %d, fewest grants %d, max wait %v, problems %q; want 0, 1, 550ms, none",
			r.Starved, r.FewestGrants, r.MaxWait, r.Problems)
	}

	// With a bound on each wait, a longer one is a problem.
	r = Result{}
	starvation(&r, evs, []int{1, 2}, 500*time.Millisecond)
	if len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "client 2 waited 550ms") {
		t.Errorf("problems %q, want one for client 2's wait of 550ms", r.Problems)
	}
	r = Result{}
	starvation(&r, evs, []int{1, 2}, 550*time.Millisecond)
	if len(r.Problems) != 0 {
		t.Errorf("problems %q for waits within the bound", r.Problems)
	}
}
