package faults

import (
	"context"
	"fmt"
	"time"
)

// pauseOrCutHolder pauses a holder (pauseHolder) and cuts one off
// (cutHolder) in turns; where the backend cannot be proxied, it pauses
// every time.
func pauseOrCutHolder(ctx context.Context, c *cell) error {
	c.injected++
	if c.injected%2 == 0 && c.b.proxied() {
		return cutHolder(ctx, c)
	}
	return pauseHolder(ctx, c)
}

// checkStarvation checks the cell's workers for starvation (see
// starvation), with a bound on each wait where the backend queues its
// writers on the server (waitBound). A worker that exited on its own and
// was replaced ran for part of the cell only, and is left out.
func (c *cell) checkStarvation(r *Result, evs []Event) {
	var clients []int
	for _, w := range c.workers {
		if !w.replaced {
			clients = append(clients, w.client)
		}
	}
	var bound time.Duration
	if c.b.queuesWriters() {
		bound = waitBound(c.b.TTL)
	}
	starvation(r, evs, clients, bound)
}

// waitBound is the longest a writer queued on the server may wait in the
// starvation scenario: five TTLs (the four clients ahead of it in the
// queue, any of them a faulted holder whose lease must run out, and the
// fault's detection) and slack for a loaded machine. Waiters that poll
// with a back-off waited 13-15s of 30s there with a TTL of 1s, against
// about 2.3s in the queue (docs/guarantees.md#no-waiter-starves).
func waitBound(ttl time.Duration) time.Duration { return 5*ttl + recoverSlack }

// starvation records in r how each of clients fared against the others
// in the history evs: the fewest grants any got (FewestGrants), the
// longest any waited for one (MaxWait, from the acquire that began its
// wait, failed retries included, to its grant, or to its exit if none
// came), and how many got none (Starved), which is a problem; so is a
// wait longer than bound, if bound is not 0.
func starvation(r *Result, evs []Event, clients []int, bound time.Duration) {
	type fare struct {
		grants  int
		waiting bool
		since   int64 // when its current wait began
		longest time.Duration
	}
	fares := map[int]*fare{}
	for _, c := range clients {
		fares[c] = &fare{}
	}
	for _, e := range evs {
		f := fares[e.Client]
		if f == nil {
			continue
		}
		switch {
		case e.Op == OpAcquire && e.Phase == Invoke && !f.waiting:
			f.waiting, f.since = true, e.T // a retry after a failed attempt goes on with the same wait
		case e.Op == OpAcquire && e.Phase == OK:
			f.grants++
			f.longest = max(f.longest, time.Duration(e.T-f.since))
			f.waiting = false
		case e.Op == OpExit && f.waiting:
			f.longest = max(f.longest, time.Duration(e.T-f.since))
			f.waiting = false
		}
	}
	r.FewestGrants = -1
	var starved []int
	for _, client := range clients {
		f := fares[client]
		r.MaxWait = max(r.MaxWait, f.longest)
		if r.FewestGrants < 0 || f.grants < r.FewestGrants {
			r.FewestGrants = f.grants
		}
		if f.grants == 0 {
			starved = append(starved, client)
		}
		if bound > 0 && f.longest > bound {
			r.Problems = append(r.Problems, fmt.Sprintf("client %d waited %v for a grant, more than %v although the backend queues its writers",
				client, f.longest.Round(time.Millisecond), bound))
		}
	}
	r.FewestGrants = max(r.FewestGrants, 0)
	r.Clients = len(clients)
	r.Starved = len(starved)
	if len(starved) > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("%d of %d clients starved (never granted the lock in the run): clients %v",
			len(starved), len(fares), starved))
	}
}
