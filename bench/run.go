package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Config says what Run measures.
type Config struct {
	// Groups are the backends under test, opened with Open or Local.
	Groups []*Group
	// Workloads to run (U1, U2, C1, C2); all if empty.
	Workloads []string
	// Matrix spans the workloads' cells (DefaultMatrix if zero).
	Matrix Matrix
	// Impls, if not empty, keeps only the implementations named.
	Impls []string
	// Duration of each implementation's turn on a cell, in each round.
	Duration time.Duration
	// Rounds is how many times every implementation takes its turn on a
	// cell, interleaved (A B C, B C A, ...), with the servers' state reset
	// after each turn.
	Rounds int
	// Progress, if set, is told of each turn as it starts.
	Progress func(done, total int, what string)
	// Command, if set, is recorded in the report: the command line that
	// made the run.
	Command string
}

// Run measures every implementation of every group on every cell of the
// workloads, and returns the report. A violation of mutual exclusion or
// token order, a client error or a key left behind ends it with an error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Duration <= 0 {
		return nil, fmt.Errorf("%w: duration %v must be positive", ErrInvalid, cfg.Duration)
	}
	if cfg.Rounds <= 0 {
		return nil, fmt.Errorf("%w: rounds %d must be positive", ErrInvalid, cfg.Rounds)
	}
	workloads := cfg.Workloads
	if len(workloads) == 0 {
		workloads = Workloads
	}
	for _, w := range workloads {
		if !contains(Workloads, w) {
			return nil, fmt.Errorf("%w: workload %q (want %s)", ErrInvalid, w, strings.Join(Workloads, ", "))
		}
	}
	m := cfg.Matrix
	if m.U2Clients == nil && m.C1Waiters == nil {
		m = DefaultMatrix()
	}
	cells := m.Cells(workloads)
	for _, c := range cells {
		if c.Clients < 1 || c.Keys < 1 || c.Theta < 0 || c.Theta == 1 || c.Hold < 0 || c.Think < 0 {
			return nil, fmt.Errorf("%w: cell %s: clients and keys must be positive, θ ≥ 0 and not 1, hold and think not negative", ErrInvalid, c)
		}
		if c.Workload == S1 && c.Limit < 2 || c.Workload == R1 && (c.Readers <= 0 || c.Readers > 1) {
			return nil, fmt.Errorf("%w: cell %s: S1's limit must be at least 2, R1's share of readers above 0 and at most 1", ErrInvalid, c)
		}
	}
	type job struct {
		g     *Group
		cell  Load
		impls []Impl
	}
	var jobs []job
	total := 0
	for _, g := range cfg.Groups {
		for _, cell := range cells {
			ims := implsFor(g, cell, cfg.Impls)
			if len(ims) > 0 {
				jobs = append(jobs, job{g, cell, ims})
				total += len(ims) * cfg.Rounds
			}
		}
	}
	if total == 0 {
		return nil, fmt.Errorf("%w: no implementation matches %v", ErrInvalid, cfg.Impls)
	}
	rep := &Report{Started: time.Now().UTC(), Duration: cfg.Duration, Rounds: cfg.Rounds, Workloads: workloads,
		Host: ThisHost(), Command: cfg.Command}
	for _, g := range cfg.Groups {
		rep.Backends = append(rep.Backends, BackendInfo{Backend: g.Backend, URL: g.URL})
	}
	runID := strconv.FormatUint(rand.Uint64()%1e12, 36)
	done := 0
	for _, j := range jobs {
		pids := serverPIDs(j.g.Servers)
		accs := make([]*acc, len(j.impls))
		for i, im := range j.impls {
			accs[i] = newAcc(j.g.Backend, im, j.cell)
		}
		for round := range cfg.Rounds {
			for n := range j.impls {
				i := (round + n) % len(j.impls)
				im := j.impls[i]
				if accs[i].r.NA != "" {
					done++
					continue
				}
				if cfg.Progress != nil {
					cfg.Progress(done, total, fmt.Sprintf("%s %s %s (round %d)", j.g.Backend, j.cell, im.Name, round+1))
				}
				prefix := fmt.Sprintf("padlock-bench/%s/%d/", runID, done)
				// Every implementation draws the same keys in a round.
				p, err := turn(ctx, j.g, im, j.cell, prefix, cfg.Duration, 0, pids, uint64(round))
				if errors.Is(err, errNA) {
					accs[i].r.NA = strings.TrimPrefix(err.Error(), errNA.Error()+": ")
					done++
					continue
				}
				if err != nil {
					return rep, fmt.Errorf("%s %s %s: %w", j.g.Backend, j.cell, im.Name, err)
				}
				accs[i].add(p)
				done++
			}
		}
		for _, a := range accs {
			r := a.result()
			if err := r.shared(); err != nil {
				return rep, fmt.Errorf("%s %s %s: %w", j.g.Backend, j.cell, r.Impl, err)
			}
			rep.Results = append(rep.Results, r)
		}
	}
	for _, g := range cfg.Groups {
		// The turns' own prefixes are gone; this takes what holds them
		// (ZooKeeper's parent nodes).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		g.Leftover(rctx, "padlock-bench/"+runID+"/")
		cancel()
	}
	if cfg.Progress != nil {
		cfg.Progress(total, total, "done")
	}
	rep.Finished = time.Now().UTC()
	rep.Host.LoadEnd = LoadAvg()
	rep.Ratios = ratios(rep.Results)
	return rep, nil
}

// ErrInvalid is a Config that Run cannot run.
var ErrInvalid = errors.New("bench: invalid configuration")

// turn opens the implementation's clients, runs one phase, closes them
// and resets the servers' state, which must hold nothing of the turn's.
func turn(ctx context.Context, g *Group, im Impl, load Load, prefix string, d time.Duration, limit int64, pids []int, seed uint64) (p *phase, err error) {
	rt := &Counter{}
	clients := make([]Client, 0, load.Clients)
	defer func() {
		for _, c := range clients {
			if cerr := c.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("close: %w", cerr)
			}
		}
		clients = nil
		// After the clients are closed, nothing of theirs may remain: a
		// lock, a queue entry or a session's node left behind is a leak.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		n, lerr := g.Leftover(rctx, prefix)
		if err == nil && lerr != nil {
			err = fmt.Errorf("reset: %w", lerr)
		}
		if err == nil && n > 0 {
			err = fmt.Errorf("%d keys (or nodes, rows) left behind under %s", n, prefix)
		}
	}()
	if load.Workload == E1 && load.Step != StepHandoff {
		open := func(ctx context.Context, rt *Counter) (Client, error) {
			c, err := openClient(ctx, im, rt, prefix, len(clients), load)
			if err == nil {
				clients = append(clients, c)
			}
			return c, err
		}
		return electPhase(ctx, im, load, open, d)
	}
	for range load.Clients {
		c, err := openClient(ctx, im, rt, prefix, len(clients), load)
		if err != nil {
			return nil, err
		}
		clients = append(clients, c)
	}
	names := make([]string, load.Keys)
	for i := range names {
		names[i] = "k" + strconv.Itoa(i)
	}
	warm := names[0]
	if load.Workload == S1 {
		// Not the semaphore's name: a writer's hold (limit 1) that a
		// backend remembers past its release would refuse the phase's
		// permits as another limit.
		warm = "warm-up-wait"
	}
	if err := warmUpWaiting(ctx, im, load, clients, warm); err != nil {
		return nil, err
	}
	return runPhase(ctx, im, clients, rt, load, names, d, limit, pids, seed)
}

// openClient opens client i of im, warmed up; on a recipe workload, one
// that does not offer the recipe is errNA.
func openClient(ctx context.Context, im Impl, rt *Counter, prefix string, i int, load Load) (Client, error) {
	// Opening is bounded too: a dead server fails the turn, it does
	// not hang it.
	octx, cancel := context.WithTimeout(ctx, minGrace)
	c, err := im.New(octx, rt, prefix)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("open a client: %w", err)
	}
	if s, ok := c.(supporter); ok && recipe(load.Workload) {
		if err := s.Supports(load.Workload); err != nil {
			c.Close()
			return nil, err
		}
	}
	oc := &onceClient{Client: c}
	// Warm up: one acquisition and release on a name of the client's
	// own, so that no implementation's first measured acquisition
	// pays for dialling, sessions, leases or script loading that
	// another's paid in New.
	wctx, cancel := context.WithTimeout(ctx, minGrace)
	h, err := c.Lock(wctx, "warm-up-"+strconv.Itoa(i))
	if err == nil {
		err = h.Release(wctx)
	}
	cancel()
	if err != nil {
		oc.Close()
		return nil, fmt.Errorf("warm up a client: %w", err)
	}
	return oc, nil
}

// onceClient closes its Client once: runPhase may close it early (to
// free a waiter stuck in a library that ignores contexts), and turn
// closes it at the end.
type onceClient struct {
	Client
	once sync.Once
	err  error
}

func (c *onceClient) Close() error {
	c.once.Do(func() { c.err = c.Client.Close() })
	return c.err
}

// abandon closes c, whatever its close says: a client whose connections
// were cut.
func abandon(c Client) {
	if o, ok := c.(*onceClient); ok {
		o.once.Do(func() { o.Client.Close() })
		return
	}
	c.Close()
}

// acc accumulates one implementation's turns on one cell.
type acc struct {
	r                              Result
	wait, rel, cycle, hof, hofCall *hdrhistogram.Histogram
	byClient                       []int64
	held                           []time.Duration // per key, within the window
	window                         time.Duration
	rts, acqs, inWindow, raced     int64
	client, server                 time.Duration
	noServer                       bool // some turn could not measure the servers' CPU
}

func newAcc(backend string, im Impl, load Load) *acc {
	return &acc{
		r: Result{Backend: backend, Impl: im.Name, Role: im.Role, Fenced: im.Fenced, Workload: load.Workload, Cell: load.String(), Clients: load.Clients, Keys: load.Keys, HoldMs: ms(load.Hold), ThinkMs: ms(load.Think), MinRT: im.MinRT,
			Readers: load.Readers, Limit: load.Limit, Step: load.Step},
		wait: newHist(), rel: newHist(), cycle: newHist(), hof: newHist(), hofCall: newHist(),
		byClient: make([]int64, load.Clients), held: make([]time.Duration, load.Keys),
	}
}

func (a *acc) add(p *phase) {
	for _, s := range p.samples {
		record(a.wait, s.got-s.asked)
		record(a.rel, s.relEnd-s.freed)
		record(a.cycle, s.relEnd-s.asked)
		// Rates count the window only: after it the clients drain, and a
		// poller's idle lock would count against it.
		if s.got <= p.window {
			a.inWindow++
			a.byClient[s.client]++
			a.held[s.key] += min(s.freed, p.window) - s.got
		}
	}
	hs, raced := handoffs(p.samples, len(a.held))
	for _, h := range hs {
		record(a.hof, h.fromReturn)
		record(a.hofCall, h.fromCall)
	}
	a.raced += int64(raced) + int64(p.raced)
	a.r.Most = max(a.r.Most, p.most)
	a.window += p.window
	a.rts += p.rts
	a.acqs += int64(len(p.samples))
	a.r.GaveUp += p.gaveUp
	a.client += p.client
	if p.server < 0 {
		a.noServer = true
	}
	a.server += p.server
	a.r.Rounds++
}

func (a *acc) result() Result {
	r := a.r
	r.Acquisitions = a.acqs
	r.WallS = a.window.Seconds()
	if a.window > 0 {
		r.PerSecond = float64(a.inWindow) / a.window.Seconds()
		r.Utilisation = float64(maxDuration(a.held)) / float64(a.window)
	}
	r.Wait, r.Release, r.Cycle = summarize(a.wait), summarize(a.rel), summarize(a.cycle)
	r.Handoff, r.HandoffFromCall = summarize(a.hof), summarize(a.hofCall)
	r.HandoffRaced = a.raced
	r.WaitCDF, r.CycleCDF = cdf(a.wait), cdf(a.cycle)
	r.Jain = jain(a.byClient)
	if a.acqs > 0 {
		r.RTPerAcq = float64(a.rts) / float64(a.acqs)
		r.WastedPerAcq = max(r.RTPerAcq-float64(r.MinRT), 0)
		r.ClientCPUUs = float64(a.client.Microseconds()) / float64(a.acqs)
		r.ServerCPUUs = -1
		if !a.noServer {
			r.ServerCPUUs = float64(a.server.Microseconds()) / float64(a.acqs)
		}
	}
	if r.Workload == E1 && r.Step == StepFailover {
		r.TTLMs = ms(ElectTTL)
	}
	if r.Workload == C1 {
		// FIFO bound: every waiter ahead holds once and hands on (its
		// release call to the next grant, the median measured) before a
		// newcomer's turn.
		r.FIFOBoundMs = float64(r.Clients) * (r.HoldMs + r.HandoffFromCall.P50)
	}
	return r
}

func maxDuration(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if strings.EqualFold(x, y) {
			return true
		}
	}
	return false
}
