package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/padlock-go/padlock/padlocktest"
)

// Options configure a run.
type Options struct {
	Backends  []Backend
	Scenarios []*Scenario
	// Faults is how many times each scenario's fault is injected into one
	// run (default 2); with Duration, at least this many, and more until
	// Duration has passed. RecipeFaults, if set, is Faults for the
	// recipes' scenarios.
	Faults       int
	RecipeFaults int
	Duration     time.Duration
	// RecipeBackends, if set, are the only backends (by name) the
	// recipes' scenarios run on; the others get no result for them.
	// StarveBackends, if set, are the same for the scenarios that check
	// that no client starves (Scenario.Starve), which run for long.
	RecipeBackends []string
	StarveBackends []string
	// Parallel is how many lanes run at once (default 1). A lane runs the
	// cells of backends that share a server kind (see laneKey) one after
	// another, on servers of its own: cells of one lane never overlap, so
	// that no fault reaches another cell's server.
	Parallel int
	// Spawn starts the run's workers and resource.
	Spawn Spawner
	// Progress, if set, gets a line per cell as it ends.
	Progress io.Writer
	// Out, if set, is a directory that gets each cell's history
	// (JSON lines).
	Out string
}

// Run runs every scenario on every backend, on servers it starts with
// padlocktest, and returns a result per cell, in the order of o.Backends
// and o.Scenarios. A cell's failure is in its result (Err, Verdict); Run's
// error is for what stops a lane (a server that does not start) or the
// whole run (ctx).
func Run(ctx context.Context, o Options) ([]Result, error) {
	if o.Faults <= 0 {
		o.Faults = 2
	}
	lanes := makeLanes(&o)
	results := make([][]Result, len(o.Backends))
	errs := make([]error, len(lanes))
	var progress sync.Mutex
	work := make(chan int, len(lanes))
	for i := range lanes {
		work <- i
	}
	close(work)
	var wg sync.WaitGroup
	for range min(max(o.Parallel, 1), len(lanes)) {
		wg.Go(func() {
			for i := range work {
				errs[i] = lanes[i].run(ctx, o, results, &progress)
			}
		})
	}
	wg.Wait()
	return slices.Concat(results...), errors.Join(errs...)
}

// lane is the backends (indexes into Options.Backends) whose cells run one
// after another.
type lane struct {
	backends []int
	weight   int // cells that run: the heaviest lanes start first
}

// laneKey is what puts two backends in one lane: the servers they run
// on. Backends of one kind (redis and redis-fair, postgres and
// postgres-advisory) share a lane, and its servers, rather than each
// starting its own.
func laneKey(b Backend) string { return fmt.Sprintf("%s/%d/%v", b.Kind, b.Nodes, b.Partitions) }

// skip reports whether o leaves sc out on b (see RecipeBackends and
// StarveBackends).
func (o *Options) skip(b Backend, sc *Scenario) bool {
	leftOut := func(only []string) bool { return only != nil && !slices.Contains(only, b.Name) }
	return sc.Recipe != "" && leftOut(o.RecipeBackends) || sc.Starve && leftOut(o.StarveBackends)
}

// makeLanes groups o's backends by laneKey, heaviest lane first.
func makeLanes(o *Options) []*lane {
	var lanes []*lane
	byKey := map[string]*lane{}
	for i, b := range o.Backends {
		l := byKey[laneKey(b)]
		if l == nil {
			l = &lane{}
			byKey[laneKey(b)] = l
			lanes = append(lanes, l)
		}
		l.backends = append(l.backends, i)
		for _, sc := range o.Scenarios {
			if sc.expect(b) != NA && !o.skip(b, sc) {
				l.weight++
			}
		}
	}
	slices.SortStableFunc(lanes, func(a, b *lane) int { return b.weight - a.weight })
	return lanes
}

// run runs the lane's cells, storing each backend's results at its index
// in results, on servers the lane starts and closes.
func (l *lane) run(ctx context.Context, o Options, results [][]Result, progress *sync.Mutex) error {
	servers := map[string]*padlocktest.Server{}
	defer func() {
		for _, s := range servers {
			s.Close()
		}
	}()
	server := func(b Backend, sc *Scenario) (*padlocktest.Server, error) {
		key := fmt.Sprintf("%s/%v", laneKey(b), sc.FakeClock)
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
	for _, i := range l.backends {
		b := o.Backends[i]
		for _, sc := range o.Scenarios {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if o.skip(b, sc) {
				continue
			}
			if sc.expect(b) == NA {
				// Nothing runs: no progress line either.
				results[i] = append(results[i], Result{Backend: b.Name, Scenario: sc.ID, Name: sc.Name, Expected: NA, Verdict: "n/a"})
				continue
			}
			begin := time.Now()
			srv, err := server(b, sc)
			if err != nil {
				return err
			}
			r := runCell(ctx, b, sc, srv, o)
			results[i] = append(results[i], r)
			if o.Progress != nil {
				progress.Lock()
				fmt.Fprintf(o.Progress, "%-18s %2d %-22s expected %s, measured %s: %s (%v)\n", b.Name, sc.ID, sc.Name,
					r.Expected, r.Measured, r.Verdict, time.Since(begin).Round(100*time.Millisecond))
				progress.Unlock()
			}
		}
	}
	return nil
}

// runCell runs one scenario on one backend: warm up, inject the fault
// o.Faults times, let the run settle, stop, and check.
func runCell(ctx context.Context, b Backend, sc *Scenario, srv *padlocktest.Server, o Options) (r Result) {
	r = Result{Backend: b.Name, Scenario: sc.ID, Name: sc.Name, Expected: sc.expect(b), TTL: b.TTL}
	if r.Expected == NA {
		r.Verdict = "n/a"
		return r
	}
	if sc.Recipe == Permit {
		r.Limit = recipeLimit
	}
	c, err := newCell(ctx, b, sc, srv, o.Spawn)
	var nr notRun
	if errors.As(err, &nr) {
		// Not a silent skip: the result says n/a, and why.
		return Result{Backend: b.Name, Scenario: sc.ID, Name: sc.Name, Expected: NA, Verdict: "n/a", NotRun: nr.Error()}
	}
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
	if err := c.awaitShared(ctx); err != nil {
		fail(fmt.Errorf("warm-up: %w", err))
	}
	faults := o.Faults
	if sc.Recipe != "" && o.RecipeFaults > 0 {
		faults = o.RecipeFaults
	}
	begin := time.Now()
	runFor := max(o.Duration, sc.MinRun)
	for i := 0; (i < faults || time.Since(begin) < runFor) && r.Err == "" && ctx.Err() == nil; i++ {
		if err := sc.inject(ctx, c); err != nil {
			fail(fmt.Errorf("fault %d: %w", i+1, err))
		}
		if err := grants(2); err != nil {
			fail(fmt.Errorf("after fault %d: %w", i+1, err))
		}
	}
	ran := time.Since(begin)
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
	if sc.Starve {
		r.Ran = ran
		c.checkStarvation(&r, evs)
	}
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
