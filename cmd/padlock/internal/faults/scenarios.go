package faults

import (
	"context"
	"errors"
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

// faultEv records a fault's start (Invoke) or end (OK); victim and token
// name the hold it is aimed at.
func (c *cell) faultEv(kind string, victim int, token uint64, phase string) {
	c.hist.add(Event{T: now(), Client: victim, Token: token, Op: OpFault, Phase: phase, Fault: kind})
}

// pauseHolder: SIGSTOP a holder held between its grant and its write,
// until another client has been granted the lock and has written (or the
// bound passes: the backend kept the lock), then SIGCONT it and wait for
// its write.
func pauseHolder(ctx context.Context, c *cell) error {
	w, tok, from, err := c.inside(ctx)
	if err != nil {
		return err
	}
	if err := w.signal(syscall.SIGSTOP); err != nil {
		c.release()
		return err
	}
	c.faultEv("pause", w.client, tok, Invoke)
	c.release() // its read answers while it is stopped
	bctx, cancel := context.WithTimeout(ctx, c.bound())
	if _, err := c.grantedOther(bctx, from, w.client); err == nil {
		c.wroteOther(bctx, from, w.client)
	}
	cancel()
	w.signal(syscall.SIGCONT)
	c.faultEv("pause", w.client, tok, OK)
	wctx, cancel := context.WithTimeout(ctx, c.bound())
	defer cancel()
	_, _, err = c.hist.await(wctx, from, func(e Event) bool {
		return e.Client == w.client && e.Op == OpWrite && e.Phase != Invoke && e.Token == tok
	})
	return err
}

// cutHolder: blackhole a holder's path to the lock server while it is
// held before its write, until another client has been granted the lock,
// then let it write (stale), and heal.
func cutHolder(ctx context.Context, c *cell) error {
	if !c.b.proxied() {
		return nil
	}
	w, tok, from, err := c.inside(ctx)
	if err != nil {
		return err
	}
	heal, err := w.lock.Blackhole(ctx)
	if err != nil {
		c.release()
		return err
	}
	c.faultEv("blackhole", w.client, tok, Invoke)
	bctx, cancel := context.WithTimeout(ctx, c.bound())
	_, gerr := c.grantedOther(bctx, from, w.client)
	cancel()
	c.release()
	herr := heal()
	c.faultEv("blackhole", w.client, tok, OK)
	if gerr != nil {
		gerr = fmt.Errorf("nobody else was granted the lock within %v: %w", c.bound(), gerr)
	}
	return errors.Join(gerr, herr)
}

// crashHolder: SIGKILL a holder held before its write, start a new worker
// in its place, and wait for the lock to be granted again.
func crashHolder(ctx context.Context, c *cell) error {
	w, tok, from, err := c.inside(ctx)
	if err != nil {
		return err
	}
	c.faultEv("crash", w.client, tok, Invoke)
	w.killed = true
	c.hist.add(Event{T: w.kill(), Client: w.client, Op: OpExit, Phase: Info})
	c.release()
	c.faultEv("crash", w.client, tok, OK)
	if _, err := c.startWorker(); err != nil {
		return err
	}
	bctx, cancel := context.WithTimeout(ctx, c.bound())
	defer cancel()
	if _, err := c.grantedOther(bctx, from, w.client); err != nil {
		return fmt.Errorf("the lock never came free: %w", err)
	}
	return nil
}

// pauseServer: with a holder held before its write, SIGSTOP every server
// node for twice the TTL, SIGCONT them, let the holder go, and wait for
// another client's grant.
func pauseServer(ctx context.Context, c *cell) error {
	w, tok, from, err := c.inside(ctx)
	if err != nil {
		return err
	}
	defer c.release()
	if err := c.srv.Pause(); err != nil {
		c.srv.Resume()
		return err
	}
	c.faultEv("server-pause", w.client, tok, Invoke)
	sleep(ctx, 2*c.b.TTL) // the fault's length, by definition
	if err := c.srv.Resume(); err != nil {
		return err
	}
	c.faultEv("server-pause", w.client, tok, OK)
	c.release()
	bctx, cancel := context.WithTimeout(ctx, c.bound())
	defer cancel()
	if _, err := c.grantedOther(bctx, from, w.client); err != nil {
		return fmt.Errorf("nobody else was granted the lock within %v: %w", c.bound(), err)
	}
	return nil
}
