package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
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
}

// workerProc is a running worker and its own paths to the servers.
type workerProc struct {
	*proc
	lock     *padlocktest.Proxy // nil when the backend cannot be proxied
	resource *padlocktest.Proxy
}

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
	for range sc.workers() {
		if _, err := c.startWorker(); err != nil {
			c.close()
			return nil, err
		}
	}
	return c, nil
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
	select {
	case c.resourceAddr = <-ready:
		return nil
	case <-p.done:
		return fmt.Errorf("faults resource exited: %s", p.errors())
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startWorker starts one more worker, with proxies of its own.
func (c *cell) startWorker() (*workerProc, error) {
	c.nextClient++
	w := &workerProc{}
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
	cfg := workerConfig{Client: c.nextClient, URL: u, Resource: w.resource.Addr(), Name: "hot",
		TTL: c.b.TTL, Wait: 3*c.b.TTL + 10*time.Second, Hold: c.sc.hold(), Think: 10 * time.Millisecond}
	w.proc, err = startProc(c.spawn(RoleWorker, cfg.args()), cfg.Client, c.hist, nil)
	if err != nil {
		w.closeProxies()
		return nil, err
	}
	c.workers = append(c.workers, w)
	return w, nil
}

func (w *workerProc) closeProxies() {
	if w.lock != nil {
		w.lock.Close()
	}
	if w.resource != nil {
		w.resource.Close()
	}
}

// fault records a fault's start (Invoke) or end (OK) on victim.
func (c *cell) fault(kind string, victim int, phase string) int64 {
	e := Event{T: now(), Client: victim, Op: OpFault, Phase: phase, Fault: kind}
	c.hist.add(e)
	return e.T
}

// inside arms the resource so that the next client to read it stays in
// its critical section for hold, waits for that read, and returns the
// reader and its token: a holder that will stay inside while the fault
// is injected.
func (c *cell) inside(ctx context.Context, hold time.Duration) (*workerProc, uint64, error) {
	from := c.hist.mark()
	resp, err := http.Post("http://"+c.resourceAddr+"/arm?hold="+hold.String(), "", nil)
	if err != nil {
		return nil, 0, err
	}
	resp.Body.Close()
	bctx, cancel := context.WithTimeout(ctx, c.bound())
	defer cancel()
	e, _, err := c.hist.await(bctx, from, func(e Event) bool { return e.Op == OpRead && e.Phase == OK && e.Hold == hold })
	if err != nil {
		return nil, 0, fmt.Errorf("no worker got into its critical section: %w", err)
	}
	for _, w := range c.workers {
		if w.client == e.Client {
			return w, e.Token, nil
		}
	}
	return nil, 0, fmt.Errorf("read by unknown client %d", e.Client)
}

func (p *proc) exitedNow() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// grantedOther waits for a grant to a client other than victim, with a
// token above tok, after index from.
func (c *cell) grantedOther(ctx context.Context, from, victim int, tok uint64) (Event, error) {
	e, _, err := c.hist.await(ctx, from, func(e Event) bool {
		return e.Op == OpAcquire && e.Phase == OK && e.Client != victim && e.Token != tok
	})
	return e, err
}

// wroteOther waits for a write by a client other than victim after index from.
func (c *cell) wroteOther(ctx context.Context, from, victim int) error {
	_, _, err := c.hist.await(ctx, from, func(e Event) bool {
		return e.Op == OpWrite && e.Phase != Invoke && e.Client != victim
	})
	return err
}

// bound is how long a fault waits for the others to get the lock: the TTL
// several times over, plus slack for a loaded machine.
func (c *cell) bound() time.Duration { return 3*c.b.TTL + 20*time.Second }

// stop ends the workers and reads the resource's final state.
func (c *cell) stop() (ResourceState, error) {
	for _, w := range c.workers {
		w.stop(20 * time.Second)
		c.hist.add(Event{T: now(), Client: w.client, Op: OpExit, Phase: OK})
	}
	var st ResourceState
	resp, err := http.Get("http://" + c.resourceAddr + "/state")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
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

// close kills whatever still runs.
func (c *cell) close() {
	for _, w := range c.workers {
		w.kill()
		w.closeProxies()
	}
	if c.resource != nil {
		c.resource.signal(syscall.SIGTERM)
		select {
		case <-c.resource.done:
		case <-time.After(10 * time.Second):
			c.resource.kill()
		}
	}
}
