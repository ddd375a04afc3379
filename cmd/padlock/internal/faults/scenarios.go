package faults

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Outcome is what a scenario is expected to do to a backend.
type Outcome string

// Outcomes.
const (
	// SAFE: no overlap, no stale write accepted, no update lost.
	SAFE Outcome = "SAFE"
	// MX: mutual exclusion is violated (critical sections overlap); with
	// fencing, every stale write is rejected (unless the backend's tokens
	// are not monotonic).
	MX Outcome = "MX"
	// DET: the holder's loss is detected (Done closes) before anyone else
	// is granted the lock.
	DET Outcome = "DET"
	// UNAV: only availability is lost while the fault lasts.
	UNAV Outcome = "UNAV"
	// NA: the scenario does not apply to the backend.
	NA Outcome = "n/a"
)

// Scenario is one kind of fault, injected again and again into a run.
type Scenario struct {
	ID      int
	Name    string
	Summary string // one sentence, for the docs
	// Workers is how many clients contend (default 3); Hold is the sleep
	// inside the critical section, between read and write (default 100ms).
	Workers int
	Hold    time.Duration
	// Expect is the expected outcome on b; nil: SAFE.
	Expect func(b Backend) Outcome
	// inject injects one fault and returns once it has healed and the
	// run can go on.
	inject func(ctx context.Context, c *cell) error
}

func (s *Scenario) workers() int {
	if s.Workers == 0 {
		return 3
	}
	return s.Workers
}

func (s *Scenario) hold() time.Duration {
	if s.Hold == 0 {
		return 100 * time.Millisecond
	}
	return s.Hold
}

func (s *Scenario) expect(b Backend) Outcome {
	if s.Expect == nil {
		return SAFE
	}
	return s.Expect(b)
}

// Scenarios are the suite's scenarios, by ID.
var Scenarios = []*Scenario{
	{
		ID: 1, Name: "holder-paused",
		Summary: "The holder is paused (SIGSTOP) between reading and writing the resource, for longer than its TTL, and resumed after another client has taken the lock and written: the positive control, which every lease-based lock must fail without fencing.",
		Expect:  func(Backend) Outcome { return MX },
		inject:  pauseHolder,
	},
	{
		ID: 4, Name: "holder-cut-off",
		Summary: "The holder's path to the lock server silently drops everything (a blackhole) for longer than its TTL: its Done must close before another client is granted the lock.",
		Expect: func(b Backend) Outcome {
			if !b.proxied() {
				return NA
			}
			return DET
		},
		inject: cutHolder,
	},
	{
		ID: 11, Name: "holder-crashed",
		Summary: "The holder is killed (SIGKILL) inside its critical section: the lock must come free, after its TTL at most, and nothing may overlap.",
		inject:  crashHolder,
	},
	{
		ID: 14, Name: "server-paused",
		Summary: "Every lock server process is paused (SIGSTOP) for twice the TTL, then resumed: holders must see their loss before anyone is granted the lock again; only availability is lost.",
		Expect:  func(Backend) Outcome { return UNAV },
		inject:  pauseServer,
	},
}

// ScenariosByID parses a comma-separated list of scenario IDs or names
// ("all": every one).
func ScenariosByID(list string) ([]*Scenario, error) {
	if list == "" || list == "all" {
		return Scenarios, nil
	}
	var out []*Scenario
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		id, _ := strconv.Atoi(f)
		var found *Scenario
		for _, s := range Scenarios {
			if s.ID == id || s.Name == f {
				found = s
			}
		}
		if found == nil {
			return nil, fmt.Errorf("%w: scenario %q", ErrInvalid, f)
		}
		out = append(out, found)
	}
	return out, nil
}

// pauseHolder: SIGSTOP a worker inside its critical section until another
// has been granted the lock and written (or the bound passes: the backend
// kept the lock), then SIGCONT it and wait for its write.
func pauseHolder(ctx context.Context, c *cell) error {
	w, tok, err := c.inside(ctx, 500*time.Millisecond)
	if err != nil {
		return err
	}
	from := c.hist.mark()
	if err := w.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	c.fault("pause", w.client, Invoke)
	bctx, cancel := context.WithTimeout(ctx, c.bound())
	if _, err := c.grantedOther(bctx, from, w.client, tok); err == nil {
		c.wroteOther(bctx, from, w.client)
	}
	cancel()
	w.signal(syscall.SIGCONT)
	c.fault("pause", w.client, OK)
	// Its write, stale or not, before the next fault.
	wctx, cancel := context.WithTimeout(ctx, c.bound())
	defer cancel()
	_, _, err = c.hist.await(wctx, from, func(e Event) bool {
		return e.Client == w.client && e.Op == OpWrite && e.Phase != Invoke && e.Token == tok
	})
	return err
}

// cutHolder: blackhole a holder's path to the lock server until another
// client has been granted the lock (or the bound passes), then heal it.
func cutHolder(ctx context.Context, c *cell) error {
	if !c.b.proxied() {
		return nil
	}
	// The holder stays inside well past its TTL, unaware, as if its work
	// were slow: its Done must close before another client's grant.
	w, tok, err := c.inside(ctx, 3*c.b.TTL)
	if err != nil {
		return err
	}
	from := c.hist.mark()
	heal, err := w.lock.Blackhole(ctx)
	if err != nil {
		return err
	}
	c.fault("blackhole", w.client, Invoke)
	bctx, cancel := context.WithTimeout(ctx, c.bound())
	c.grantedOther(bctx, from, w.client, tok)
	cancel()
	err = heal()
	c.fault("blackhole", w.client, OK)
	return err
}

// crashHolder: SIGKILL a holder, start a new worker in its place, and wait
// for the lock to be granted again.
func crashHolder(ctx context.Context, c *cell) error {
	w, tok, err := c.inside(ctx, time.Second)
	if err != nil {
		return err
	}
	from := c.hist.mark()
	c.fault("crash", w.client, Invoke)
	w.kill()
	c.hist.add(Event{T: now(), Client: w.client, Op: OpExit, Phase: Info})
	c.fault("crash", w.client, OK)
	if _, err := c.startWorker(); err != nil {
		return err
	}
	bctx, cancel := context.WithTimeout(ctx, c.bound())
	defer cancel()
	_, err = c.grantedOther(bctx, from, w.client, tok)
	return err
}

// pauseServer: SIGSTOP every server node for twice the TTL, SIGCONT, and
// wait for a grant.
func pauseServer(ctx context.Context, c *cell) error {
	// A holder stays inside across the pause.
	if _, _, err := c.inside(ctx, 3*c.b.TTL); err != nil {
		return err
	}
	if err := c.srv.Pause(); err != nil {
		return err
	}
	c.fault("server-pause", 0, Invoke)
	sleep(ctx, 2*c.b.TTL) // the fault's length, by definition
	if err := c.srv.Resume(); err != nil {
		return err
	}
	c.fault("server-pause", 0, OK)
	from := c.hist.mark()
	bctx, cancel := context.WithTimeout(ctx, c.bound())
	defer cancel()
	_, _, err := c.hist.await(bctx, from, func(e Event) bool { return e.Op == OpAcquire && e.Phase == OK })
	return err
}
