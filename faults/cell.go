package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/padlocktest"
)

// cell is one scenario run on one backend.
type cell struct {
	b     Backend
	sc    *Scenario
	srv   *padlocktest.Server
	ns    string
	spawn Spawner
	hist  *history
	caps  padlock.Capabilities

	resource     *proc
	resourceAddr string
	workers      []*workerProc
	nextClient   int
	// clockOffset is how far clock faults have moved the server's wall
	// clock; clocksTouched, whether any fault tried to. close sets them
	// true again.
	clockOffset   time.Duration
	clocksTouched bool
	// injected counts the faults injected so far, for scenarios that
	// take turns between faults.
	injected int
}

// workerProc is a running worker and its own paths to the servers.
type workerProc struct {
	*proc
	lock     *padlocktest.Proxy // nil when the backend cannot be proxied
	resource *padlocktest.Proxy
	spec     workerSpec
	killed   bool // by a scenario, on purpose
	replaced bool // it exited on its own, and another took its place
}

// api is the orchestrator's client of the resource: every call bounded.
var api = &http.Client{Timeout: 30 * time.Second}

var cellSeq atomic.Int64

// newCell starts the resource and the scenario's workers.
func newCell(ctx context.Context, b Backend, sc *Scenario, srv *padlocktest.Server, spawn Spawner) (*cell, error) {
	c := &cell{b: b, sc: sc, srv: srv, spawn: spawn, hist: newHistory(),
		ns: fmt.Sprintf("faults-%d-s%d-%d", time.Now().Unix()%100000, sc.ID, cellSeq.Add(1))}
	if err := c.startResource(ctx); err != nil {
		c.close()
		return nil, err
	}
	direct, err := b.url(srv.URL(), c.ns)
	if err != nil {
		c.close()
		return nil, err
	}
	l, err := padlock.Open(ctx, direct)
	if err != nil {
		c.close()
		return nil, fmt.Errorf("%s: %w", b.Name, err)
	}
	c.caps = l.Capabilities()
	l.Close()
	if ok, lacks := supported(sc.Recipe, c.caps); !ok {
		c.close()
		return nil, notRun{lacks}
	}
	for _, spec := range recipeWorkers(sc.Recipe, sc.workers()) {
		if _, err := c.startWorker(spec); err != nil {
			c.close()
			return nil, err
		}
	}
	if err := c.awaitOpened(ctx, c.workers...); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// awaitOpened waits until each of ws has opened its Locker (its first
// acquire): a worker still starting, on a loaded machine, when a fault
// restarts or pauses the server, or when the cell stops it, would fail to
// open, and the cell with it.
func (c *cell) awaitOpened(ctx context.Context, ws ...*workerProc) error {
	bctx, cancel := context.WithTimeout(ctx, c.bound())
	defer cancel()
	for _, w := range ws {
		e, _, err := c.hist.await(bctx, 0, func(e Event) bool {
			return e.Client == w.client && (e.Op == OpAcquire || e.Op == OpExit)
		})
		switch {
		case err != nil:
			return fmt.Errorf("worker %d did not open its Locker within %v: %w", w.client, c.bound(), err)
		case e.Op == OpExit:
			<-w.done
			return fmt.Errorf("worker %d exited before its first acquire: %v", w.client, w.failure(false))
		}
	}
	return nil
}

func (c *cell) startResource(ctx context.Context) error {
	ready := make(chan string, 1)
	p, err := startProc(c.spawn(RoleResource, nil), -1, c.hist, func(line string) bool {
		if addr, ok := strings.CutPrefix(line, resourceReady); ok {
			ready <- addr
			return true
		}
		return false
	})
	if err != nil {
		return err
	}
	c.resource = p
	t := time.NewTimer(time.Minute)
	defer t.Stop()
	select {
	case c.resourceAddr = <-ready:
		return nil
	case <-p.done:
		return fmt.Errorf("faults resource exited: %v", p.failure(false))
	case <-t.C:
		return errors.New("faults resource not ready within a minute")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// notRun is newCell's error for a cell whose recipe the backend does not
// run: its Capabilities lack what it needs.
type notRun struct{ lacks string }

func (e notRun) Error() string { return "the backend's Capabilities lack " + e.lacks }

// startWorker starts one more worker of spec, with proxies of its own.
func (c *cell) startWorker(spec workerSpec) (*workerProc, error) {
	c.nextClient++
	w := &workerProc{spec: spec}
	var err error
	base := c.srv.URL()
	if c.b.proxied() {
		if w.lock, err = padlocktest.NewProxy(strings.Split(c.srv.Addrs(), ",")...); err != nil {
			return nil, err
		}
		base = c.srv.URLVia(w.lock)
	}
	if w.resource, err = padlocktest.NewProxy(c.resourceAddr); err != nil {
		w.closeProxies()
		return nil, err
	}
	u, err := c.b.url(base, c.ns)
	if err != nil {
		w.closeProxies()
		return nil, err
	}
	cfg := workerConfig{Client: c.nextClient, URL: u, Resource: w.resource.Addr(), Name: strings.Join(spec.names, ","),
		Kind: spec.kind, Limit: spec.limit, Term: leaderTerm * c.sc.hold(),
		TTL: c.b.TTL, Wait: 3*c.b.TTL + 10*time.Second, Hold: c.sc.hold(), Think: 10 * time.Millisecond,
		WriteTimeout: c.sc.WriteTimeout}
	if spec.kind == Reader && !c.b.queues() {
		// Without a queue, readers pause between holds (twice a hold),
		// so that the name is at times free of them: two readers
		// taking turns would keep the writer out (nothing makes them
		// wait for it there), and a crashed reader's lock could not be
		// seen coming free. Where the backend queues, the writer's
		// place in the queue lets it in, and readers queued behind it
		// share (with this pause, readers and the writer alternate
		// and no two readers ever share).
		cfg.Think = 2 * c.sc.hold()
	}
	w.proc, err = startProc(c.spawn(RoleWorker, cfg.args()), cfg.Client, c.hist, nil)
	if err != nil {
		w.closeProxies()
		return nil, err
	}
	c.workers = append(c.workers, w)
	return w, nil
}

// replaceExited starts a worker in the place of each that has exited on
// its own (one that gave up on a write), so that as many contend as before,
// and waits until each has opened its Locker.
func (c *cell) replaceExited(ctx context.Context) error {
	for _, w := range slices.Clone(c.workers) {
		if w.killed || w.replaced || !w.exitedNow() {
			continue
		}
		w.replaced = true
		nw, err := c.startWorker(w.spec)
		if err != nil {
			return err
		}
		if err := c.awaitOpened(ctx, nw); err != nil {
			return err
		}
	}
	return nil
}

func (w *workerProc) closeProxies() {
	if w.lock != nil {
		w.lock.Close()
	}
	if w.resource != nil {
		w.resource.Close()
	}
}

// inside arms the resource so that the next client to read it is held
// there, between its grant and its write, and returns that client, its
// token, and the history index after the held event. The scenario injects
// its fault, then lets the read go (release).
func (c *cell) inside(ctx context.Context) (*workerProc, uint64, int, error) {
	return c.insideWithin(ctx, c.bound())
}

// insideWithin is inside, waiting for a holder for d at most; on error the
// resource is disarmed.
func (c *cell) insideWithin(ctx context.Context, d time.Duration) (*workerProc, uint64, int, error) {
	from := c.hist.mark()
	// A read-write cell's fault is aimed at a reader.
	arm := "/arm"
	if c.sc.Recipe == Reader {
		arm += "?kind=" + string(Reader)
	}
	if err := c.post(arm); err != nil {
		return nil, 0, 0, err
	}
	bctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	e, next, err := c.hist.await(bctx, from, func(e Event) bool { return e.Op == OpHeld })
	if err != nil {
		c.release()
		return nil, 0, 0, fmt.Errorf("no worker got into its critical section within %v: %w", d, err)
	}
	for _, w := range c.workers {
		if w.client == e.Client {
			return w, e.Token, next, nil
		}
	}
	c.release()
	return nil, 0, 0, fmt.Errorf("read by unknown client %d", e.Client)
}

// awaitQueued waits until the server shows a waiter queued behind the
// holder, on backends that queue waiters (see Backend.queues).
func (c *cell) awaitQueued(ctx context.Context) error {
	if !c.b.queues() {
		return nil
	}
	u, err := c.b.url(c.srv.URL(), c.ns)
	if err != nil {
		return err
	}
	l, err := padlock.Open(ctx, u)
	if err != nil {
		return err
	}
	defer l.Close()
	deadline := time.Now().Add(c.bound())
	for {
		hs, err := l.Holders(ctx, "")
		if err == nil && len(hs) > 0 && hs[0].Waiters > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no waiter queued on the server within %v (last look: %v, %v)", c.bound(), hs, err)
		}
		sleep(ctx, 20*time.Millisecond)
	}
}

// release lets the held read go.
func (c *cell) release() error { return c.post("/release") }

func (c *cell) post(path string) error {
	resp, err := api.Post("http://"+c.resourceAddr+path, "", nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("resource %s: %s", path, resp.Status)
	}
	return nil
}

// grantedOther waits for a grant after index from that conflicts with
// victim's hold with token tok (see conflicts: any other client's, in a
// mutex cell; a writer's, for a reader; one beyond the limit, for a
// permit).
func (c *cell) grantedOther(ctx context.Context, from, victim int, tok uint64) error {
	for {
		_, next, err := c.hist.await(ctx, from, func(e Event) bool {
			return e.Op == OpAcquire && e.Phase == OK && e.Client != victim
		})
		if err != nil {
			return fmt.Errorf("nobody else was granted the lock within %v: %w", c.bound(), err)
		}
		if c.conflictSeen(ctx, victim, tok) {
			return nil
		}
		from = next
	}
}

// conflictSeen reports whether a grant conflicting with victim's latest
// hold with token tok is in the history, once every other worker's events
// up to that grant have arrived (a release sent before it may still be on
// its way through a pipe, and a hold that looks open would make a permit
// grant look like one beyond the limit).
func (c *cell) conflictSeen(ctx context.Context, victim int, tok uint64) bool {
	holds := holdsOf(c.hist.snapshot())
	v := holdAt(holds, victim, tok, now())
	if v == nil {
		return true // a waiter's fault: any other grant
	}
	g := firstConflict(holds, acquisition(holds, v), v.start, c.limit())
	if g == nil || c.sc.Recipe != Permit {
		return g != nil
	}
	for _, w := range c.workers {
		if w.client == victim || w.exitedNow() {
			continue
		}
		c.hist.await(ctx, 0, func(e Event) bool { return e.Client == w.client && e.T > g.start })
	}
	holds = holdsOf(c.hist.snapshot())
	v = holdAt(holds, victim, tok, now())
	return firstConflict(holds, acquisition(holds, v), v.start, c.limit()) != nil
}

// awaitShared waits, in a read-write or semaphore cell, until two readers
// or the limit's permits have held at once, so that every run tests
// sharing (the checker asserts it: see Result.Shared).
func (c *cell) awaitShared(ctx context.Context) error {
	want := 0
	switch c.sc.Recipe {
	case Reader:
		want = 2
	case Permit:
		want = recipeLimit
	default:
		return nil
	}
	bctx, cancel := context.WithTimeout(ctx, c.bound())
	defer cancel()
	for from := 0; ; {
		var r Result
		r.overlaps(holdsOf(c.hist.snapshot()), c.limit(), func(string, ...any) {})
		if r.Shared >= want {
			return nil
		}
		_, next, err := c.hist.await(bctx, from, func(e Event) bool { return e.Op == OpAcquire && e.Phase == OK })
		if err != nil {
			return fmt.Errorf("never %d holders at once within %v (at most %d)", want, c.bound(), r.Shared)
		}
		from = next
	}
}

// limit is the cell's semaphore limit (1 where there is none).
func (c *cell) limit() int {
	if c.sc.Recipe == Permit {
		return recipeLimit
	}
	return 1
}

// wroteOther waits for a write (or a reader's check) by a client other
// than victim after index from.
func (c *cell) wroteOther(ctx context.Context, from, victim int) error {
	_, _, err := c.hist.await(ctx, from, func(e Event) bool {
		return (e.Op == OpWrite || e.Op == OpCheck) && e.Phase != Invoke && e.Client != victim
	})
	return err
}

// bound is how long a fault waits for the others to get the lock: the TTL
// several times over, plus slack for a loaded machine.
func (c *cell) bound() time.Duration { return 3*c.b.TTL + 20*time.Second }

// stop ends the workers and reads the resource's final state. It reports
// what went wrong in any child: a worker that failed, raced or wrote to
// its stderr.
func (c *cell) stop() (ResourceState, error) {
	var errs []error
	c.release() // a read still held
	for _, w := range c.workers {
		if !w.killed {
			w.term()
		}
	}
	for _, w := range c.workers {
		if !w.killed {
			w.stop(20 * time.Second)
			c.hist.add(Event{T: now(), Client: w.client, Op: OpExit, Phase: OK})
		}
		if err := w.failure(w.killed); err != nil {
			errs = append(errs, fmt.Errorf("worker %d: %w", w.client, err))
		}
	}
	var st ResourceState
	resp, err := api.Get("http://" + c.resourceAddr + "/state")
	if err != nil {
		return st, errors.Join(append(errs, err)...)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		errs = append(errs, err)
	}
	c.resource.term() // close waits for it, after the leak check
	return st, errors.Join(errs...)
}

// leaks waits for the server to show no holder in the cell's namespace,
// up to two TTLs and some slack, and returns what is left then.
func (c *cell) leaks(ctx context.Context) (int, error) {
	u, err := c.b.url(c.srv.URL(), c.ns)
	if err != nil {
		return 0, err
	}
	l, err := padlock.Open(ctx, u)
	if err != nil {
		return 0, err
	}
	defer l.Close()
	deadline := time.Now().Add(2*c.b.TTL + 15*time.Second)
	for {
		hs, err := l.Holders(ctx, "")
		if errors.Is(err, padlock.ErrUnsupported) {
			return 0, nil
		}
		if err == nil && len(hs) == 0 || time.Now().After(deadline) {
			return len(hs), err
		}
		sleep(ctx, 100*time.Millisecond)
		if ctx.Err() != nil {
			return len(hs), ctx.Err()
		}
	}
}

// close kills whatever still runs, and the resource (whose failure, if
// any, it returns).
func (c *cell) close() error {
	for _, w := range c.workers {
		if !w.exitedNow() {
			w.kill()
		}
		w.closeProxies()
	}
	if c.sc.FakeClock && c.clocksTouched {
		c.clockOffset, c.clocksTouched = 0, false
		if err := c.setClocks(0, 1); err != nil {
			return fmt.Errorf("setting the server's clock true again: %w", err)
		}
	}
	if c.resource == nil {
		return nil
	}
	c.resource.stop(10 * time.Second)
	if err := c.resource.failure(false); err != nil {
		return fmt.Errorf("resource: %w", err)
	}
	return nil
}
