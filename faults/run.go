package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/padlock-go/padlock/padlocktest"
)

// Options configure a run.
type Options struct {
	Backends  []Backend
	Scenarios []*Scenario
	// Faults is how many times each scenario's fault is injected into one
	// run (default 2); with Duration, at least this many, and more until
	// Duration has passed.
	Faults   int
	Duration time.Duration
	// Spawn starts the run's workers and resource.
	Spawn Spawner
	// Progress, if set, gets a line per cell as it starts and ends.
	Progress io.Writer
	// Out, if set, is a directory that gets each cell's history
	// (JSON lines).
	Out string
}

// Run runs every scenario on every backend, on servers it starts with
// padlocktest, and returns a result per cell. A cell's failure is in its
// result (Err, Verdict); Run's error is for what stops the whole run.
func Run(ctx context.Context, o Options) ([]Result, error) {
	if o.Faults <= 0 {
		o.Faults = 2
	}
	servers := map[string]*padlocktest.Server{}
	defer func() {
		for _, s := range servers {
			s.Close()
		}
	}()
	var results []Result
	server := func(b Backend, sc *Scenario) (*padlocktest.Server, error) {
		key := fmt.Sprintf("%s/%d/%v/%v", b.Kind, b.Nodes, sc.FakeClock, b.Partitions)
		if srv := servers[key]; srv != nil {
			return srv, nil
		}
		var opts []padlocktest.Option
		if b.Nodes > 0 {
			opts = append(opts, padlocktest.Nodes(b.Nodes))
		}
		if sc.FakeClock {
			opts = append(opts, padlocktest.FakeClock())
		}
		if b.Partitions {
			opts = append(opts, padlocktest.Partitions())
		}
		srv, err := padlocktest.New(ctx, b.Kind, opts...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.Name, err)
		}
		servers[key] = srv
		return srv, nil
	}
	for _, b := range o.Backends {
		for _, sc := range o.Scenarios {
			if sc.expect(b) == NA {
				// Nothing runs: no progress line either.
				results = append(results, Result{Backend: b.Name, Scenario: sc.ID, Name: sc.Name, Expected: NA, Verdict: "n/a"})
				continue
			}
			if o.Progress != nil {
				fmt.Fprintf(o.Progress, "%-18s %2d %-16s ...", b.Name, sc.ID, sc.Name)
			}
			begin := time.Now()
			srv, err := server(b, sc)
			if err != nil {
				return results, err
			}
			r := runCell(ctx, b, sc, srv, o)
			results = append(results, r)
			if o.Progress != nil {
				fmt.Fprintf(o.Progress, " expected %s, measured %s: %s (%v)\n", r.Expected, r.Measured, r.Verdict,
					time.Since(begin).Round(100*time.Millisecond))
			}
			if ctx.Err() != nil {
				return results, ctx.Err()
			}
		}
	}
	return results, nil
}

// runCell runs one scenario on one backend: warm up, inject the fault
// o.Faults times, let the run settle, stop, and check.
func runCell(ctx context.Context, b Backend, sc *Scenario, srv *padlocktest.Server, o Options) (r Result) {
	r = Result{Backend: b.Name, Scenario: sc.ID, Name: sc.Name, Expected: sc.expect(b), TTL: b.TTL}
	if r.Expected == NA {
		r.Verdict = "n/a"
		return r
	}
	c, err := newCell(ctx, b, sc, srv, o.Spawn)
	if err != nil {
		r.Err = err.Error()
		r.Verdict = verdict(&r, true)
		return r
	}
	defer c.close()
	monotonic := c.caps.MonotonicTokens
	fail := func(err error) {
		if r.Err == "" {
			r.Err = err.Error()
		}
	}
	grants := func(n int) error {
		from := c.hist.mark()
		for range n {
			bctx, cancel := context.WithTimeout(ctx, c.bound())
			var err error
			_, from, err = c.hist.await(bctx, from, func(e Event) bool { return e.Op == OpAcquire && e.Phase == OK })
			cancel()
			if err != nil {
				return fmt.Errorf("no grant within %v: %w", c.bound(), err)
			}
		}
		return nil
	}
	if err := grants(3); err != nil {
		fail(fmt.Errorf("warm-up: %w", err))
	}
	begin := time.Now()
	for i := 0; (i < o.Faults || time.Since(begin) < o.Duration) && r.Err == "" && ctx.Err() == nil; i++ {
		if err := sc.inject(ctx, c); err != nil {
			fail(fmt.Errorf("fault %d: %w", i+1, err))
		}
		if err := grants(2); err != nil {
			fail(fmt.Errorf("after fault %d: %w", i+1, err))
		}
	}
	st, err := c.stop()
	if err != nil {
		fail(err)
	}
	if r.Leaks, err = c.leaks(ctx); err != nil {
		fail(fmt.Errorf("leak check: %w", err))
	}
	if err := c.close(); err != nil {
		fail(err)
	}
	evs := c.hist.snapshot()
	check(&r, evs, st, b.TTL)
	if o.Out != "" {
		if err := writeHistory(filepath.Join(o.Out, fmt.Sprintf("%s-%02d-%s.jsonl", b.Name, sc.ID, sc.Name)), evs); err != nil {
			fail(err)
		}
	}
	if r.Tokens != "ok" && o.Out != "" {
		r.Visual = filepath.Join(o.Out, fmt.Sprintf("%s-%02d-%s.html", b.Name, sc.ID, sc.Name))
		if err := writeVisual(r.Visual, evs, r.lin); err != nil {
			fail(fmt.Errorf("porcupine visualisation: %w", err))
		}
	}
	r.Verdict = verdict(&r, monotonic)
	if r.Verdict != "ok" {
		r.history = evs
	}
	return r
}

func writeHistory(path string, evs []Event) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, e := range evs {
		enc.Encode(e)
	}
	return f.Close()
}
