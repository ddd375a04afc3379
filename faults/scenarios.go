package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/padlock-go/padlock/padlocktest"
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
	// WriteTimeout bounds each worker's write to the resource (0: none).
	WriteTimeout time.Duration
	// FakeClock: the scenario moves the lock server's wall clock, and runs
	// on a server started with padlocktest.FakeClock.
	FakeClock bool
	// Expect is the expected outcome on b; nil: SAFE.
	Expect func(b Backend) Outcome
	// Breaks is the assumption of the lost-lock rule (docs/lost-lock.md)
	// that the fault breaks, if any.
	Breaks Assumption
	// MinRun: the cell goes on injecting its fault for at least this
	// long, however few faults the run asks for. Starve: the cell checks
	// that no client starves (see checkStarvation): every worker that ran
	// from the start to the end was granted the lock.
	MinRun time.Duration
	Starve bool
	// Recipe is the kind of hold the fault is aimed at, in a cell of that
	// recipe's workers (see recipeWorkers); "" is the mutex's cell of
	// Workers writers. A backend whose Capabilities lack the recipe runs
	// none of its cells (NA).
	Recipe Kind
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
	if b.Only != nil && !slices.Contains(b.Only, s.ID) {
		return NA
	}
	if s.Expect == nil {
		return SAFE
	}
	return s.Expect(b)
}

// Scenarios are the suite's scenarios, by ID: the mutex's, then the
// recipes' holder scenarios (see recipeScenarios).
var Scenarios = append(mutexScenarios, recipeScenarios(mutexScenarios)...)

// mutexScenarios are the scenarios of a cell of writers (the mutex).
var mutexScenarios = []*Scenario{
	{
		ID: 1, Name: "holder-paused",
		Breaks:  HolderActs,
		Summary: "The holder is paused (SIGSTOP) between reading and writing the resource, for longer than its TTL, and resumed after another client has taken the lock and written: the positive control, which every lease-based lock must fail without fencing.",
		Expect:  func(Backend) Outcome { return MX },
		inject:  pauseHolder,
	},
	{
		ID: 2, Name: "acquirer-paused",
		Summary: "A client queued in Lock is paused (SIGSTOP) while the lock is handed to it, for longer than the TTL, and resumed after another client has taken the lock: the grant that reached it during the pause must not be acted on. (Backends without a server-side queue hand nothing to a paused client: a paused poller sends nothing; scenario 12 loses an acquire's answer instead.)",
		Workers: 2,
		Expect: func(b Backend) Outcome {
			if !b.queues() {
				return NA
			}
			return SAFE
		},
		inject: pauseAcquirer,
	},
	{
		ID: 3, Name: "waiter-cut-off",
		Summary: "A waiting client's path to the lock server silently drops everything while the lock is handed to it, for longer than the TTL: its queue place or session expires, and it must not act on a grant it could not keep.",
		Workers: 2,
		Expect:  proxiedOnly(SAFE),
		inject:  cutWaiter,
	},
	{
		ID: 4, Name: "holder-cut-off",
		Summary: "The holder's path to the lock server silently drops everything (a blackhole) for longer than its TTL: its Done must close before another client is granted the lock.",
		Expect:  proxiedOnly(DET),
		inject:  cutHolder,
	},
	{
		ID: 5, Name: "resource-write-delayed",
		Breaks:       HolderActs,
		Summary:      "The holder's write to the resource is held up on the network; the holder gives up on it after a TTL and releases, the next client takes the lock and writes, and only then does the delayed write arrive: the lock cannot stop it, only a fenced resource can.",
		Expect:       func(Backend) Outcome { return MX },
		WriteTimeout: time.Second,
		inject:       delayWrite,
	},
	{
		ID: 6, Name: "server-restarted",
		Breaks:  ServerKeepsState,
		Summary: "The lock server is killed and restarted at once while a client holds the lock (all of a Redis Cluster's nodes; one of RedLock's masters; the leader of a three-server etcd or ZooKeeper cluster): what the server keeps on disk decides whether the lock survives.",
		Expect: func(b Backend) Outcome {
			switch {
			case b.Kind == padlocktest.Redis || b.Kind == padlocktest.RedisCluster:
				return UNSAFE // no persistence: the lock and the token counter are gone
			case b.Kind == padlocktest.RedLock:
				// A master restarted at once, without its keys, gives
				// another client a majority (the Redis distlock
				// document's "delayed restarts") when the holder had
				// won a bare one: a race, as in scenario 9.
				return UNSAFEorSAFE
			case strings.Contains(b.Query, "mode=advisory"):
				// The holder's session, and its advisory lock, end with
				// the server; the durable counter keeps fencing. Whether
				// the holder's Done closes before the restarted server
				// grants the name to another client is a race (measured
				// both ways under load).
				return MXorDET
			}
			return SAFE
		},
		inject: restartServer,
	},
	{
		ID: 7, Name: "replica-failover",
		Breaks:  ServerKeepsState,
		Summary: "Redis behind Sentinel: the replica stops taking the replication stream, a client is granted the lock on the primary, the primary dies, and Sentinel promotes the replica, which never saw the grant. With wait_replicas=1 no grant completes while the replica is cut off: only availability is lost.",
		Expect: func(b Backend) Outcome {
			switch {
			case b.Kind != padlocktest.RedisSentinel:
				return NA
			case strings.Contains(b.Query, "wait_replicas"):
				return SAFE
			}
			return UNSAFE // asynchronous replication: the grant dies with the primary
		},
		inject: failover,
	},
	{
		ID: 8, Name: "leader-partitioned",
		Summary: "The etcd or ZooKeeper leader is cut off from its peers (each server on a test host of its own) while a client holds the lock, for three TTLs: the minority side cannot commit, the majority elects a leader and goes on; every client can still reach every server. Nothing may overlap, and a holder that loses its lease or session must know before anyone else is granted the lock.",
		Expect: func(b Backend) Outcome {
			if !b.Partitions {
				return NA
			}
			return SAFE
		},
		inject: partitionLeader,
	},
	{
		ID: 9, Name: "server-clock-jump",
		Breaks:    ServerClock,
		Summary:   "The lock server's wall clock jumps forward by ten TTLs while a client holds the lock (every node's; one of RedLock's masters): Redis expires keys by its wall clock, so the lock is gone at once, and another client takes it while the holder is inside; RedLock holds only while the holder has more than a bare majority.",
		Expect:    clockExpect,
		FakeClock: true,
		inject:    jumpClock,
	},
	{
		ID: 10, Name: "server-clock-fast",
		Breaks:    ServerClock,
		Summary:   "The lock server's wall clock runs ten times too fast while a client holds the lock (every node's; one of RedLock's masters): a TTL passes in a tenth of its time, between two renewals, so the lock is lost, and another client may take it before the holder's next renewal tells it so.",
		Expect:    clockExpect,
		FakeClock: true,
		inject:    fastClock,
	},
	{
		ID: 11, Name: "holder-crashed",
		Summary: "The holder is killed (SIGKILL) inside its critical section: the lock must come free, after its TTL at most, and nothing may overlap.",
		inject:  crashHolder,
	},
	{
		ID: 12, Name: "acquire-answer-lost",
		Summary: "A waiting client's requests reach the lock server but every answer is dropped while the lock is handed to it, for twice the TTL: an acquisition the client never hears of must not let two clients in.",
		Expect:  proxiedOnly(SAFE),
		inject:  dropWaiterAnswers,
	},
	{
		ID: 13, Name: "release-answer-lost",
		Summary: "The holder's Unlock reaches the server but its answer is dropped; the next client takes the lock; then the path heals and the holder's cleanup retries its release: the retry must not free the new holder's lock (etcd issue 22082).",
		Expect:  proxiedOnly(SAFE),
		inject:  dropReleaseAnswer,
	},
	{
		ID: 14, Name: "server-paused",
		Summary: "Every lock server process is paused (SIGSTOP) for twice the TTL, then resumed: holders must see their loss before anyone is granted the lock again; only availability is lost. On a three-server etcd or ZooKeeper cluster only the leader is paused: the others elect a leader and go on, and nothing may overlap.",
		Expect: func(b Backend) Outcome {
			// On ZooKeeper, followers answer a client's pings and reads
			// while the leader is paused, and the resumed leader
			// expires the session at once: padlock's session prover
			// makes the leader prove it recorded the session (see
			// zookeeper/proof.go), so the holder's Done closes first.
			if b.ensemble() {
				return SAFE
			}
			return UNAV
		},
		inject: pauseServer,
	},
	{
		ID: 15, Name: "membership-change",
		Summary: "While a client holds the lock and the others wait, a fourth etcd member is added, made leader, and removed again (three membership changes and two leader changes): nothing may overlap, and the lock must go on being granted.",
		Expect:  membersOnly,
		inject:  changeMembers,
	},
	{
		ID: 16, Name: "contended-faulted",
		Breaks:  HolderActs,
		Summary: "Five clients contend for one name for at least 30s, each locking again at once after a hold of 60ms, while holders are paused (SIGSTOP, for longer than the TTL, as in scenario 1) and cut off (as in scenario 4) in turns: every client must be granted the lock in the run, and a client's longest wait is measured (no waiter starves). The pauses overlap, as scenario 1's must.",
		Workers: 5, Hold: 60 * time.Millisecond, MinRun: 30 * time.Second, Starve: true,
		Expect: func(Backend) Outcome { return MX },
		inject: pauseOrCutHolder,
	},
}

// clockExpect is the expected outcome of a clock fault. Redis expires keys
// by its wall clock, so a single Redis or a Cluster loses the lock; its
// token counter has no TTL, so fencing still holds. Whether another
// client is granted the lock before the holder's next renewal tells it
// (MX) or after (DET) is a race between that renewal and the waiters'
// next tries: MXorDET. RedLock is UNSAFEorSAFE: a holder that won a bare
// majority (two of three masters: it missed one, whose previous holder's
// release raced its acquire) loses it when one of its masters' clocks
// moves, and another client wins that master and the one the holder
// missed (Kleppmann's example, measured); a holder of all three keeps it.
// The other servers' clocks cannot be moved here: etcd is a Go program,
// which an LD_PRELOAD library cannot reach, ZooKeeper times sessions by
// the JVM's monotonic clock, and the databases are not offered.
func clockExpect(b Backend) Outcome {
	switch b.Kind {
	case padlocktest.Redis, padlocktest.RedisCluster:
		return MXorDET
	case padlocktest.RedLock:
		return UNSAFEorSAFE
	}
	return NA
}

// membersOnly: the membership scenario runs on the etcd cluster made for it.
func membersOnly(b Backend) Outcome {
	if b.Name != "etcd-members" {
		return NA
	}
	return SAFE
}

// proxiedOnly is an expectation for scenarios that need a client's own
// path: o, or n/a where clients cannot be proxied.
func proxiedOnly(o Outcome) func(Backend) Outcome {
	return func(b Backend) Outcome {
		if !b.proxied() {
			return NA
		}
		return o
	}
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

// pathFault injects a fault on w (apply returns what heals it), recording
// its start and end as aimed at w's hold tok (0: a waiter), lets the held
// read go (at once, or with keepInside only once until has returned, so
// that the holder stays inside meanwhile), waits until until returns (it
// gets a context bounded by c.bound()), and heals. The fault starts when
// apply starts: a fault on several nodes (every clock of a Redis Cluster)
// may bite on the first before apply has moved the last.
func (c *cell) pathFault(ctx context.Context, kind string, w *workerProc, tok uint64, keepInside bool,
	apply func(context.Context) (func() error, error), until func(context.Context) error) error {
	c.faultEv(kind, w.client, tok, Invoke)
	heal, err := apply(ctx)
	if err != nil {
		c.release()
		c.faultEv(kind, w.client, tok, OK)
		return err
	}
	if !keepInside {
		c.release()
	}
	bctx, cancel := context.WithTimeout(ctx, c.bound())
	uerr := until(bctx)
	cancel()
	c.release()
	herr := heal()
	c.faultEv(kind, w.client, tok, OK)
	return errors.Join(uerr, herr)
}

// regranted waits until h, the holder the fault waited behind, has the
// lock again.
func (c *cell) regranted(from int, h *workerProc) func(context.Context) error {
	return func(bctx context.Context) error {
		_, _, err := c.hist.await(bctx, from, func(e Event) bool {
			return e.Op == OpAcquire && e.Phase == OK && e.Client == h.client
		})
		if err != nil {
			return fmt.Errorf("the lock never came back to client %d: %w", h.client, err)
		}
		return nil
	}
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
	if err := c.grantedOther(bctx, from, w.client, tok); err == nil {
		c.wroteOther(bctx, from, w.client)
	}
	cancel()
	w.signal(syscall.SIGCONT)
	c.faultEv("pause", w.client, tok, OK)
	wctx, cancel := context.WithTimeout(ctx, c.bound())
	defer cancel()
	_, _, err = c.hist.await(wctx, from, func(e Event) bool {
		return e.Client == w.client && (e.Op == OpWrite || e.Op == OpCheck) && e.Phase != Invoke && e.Token == tok
	})
	return err
}

// delayWrite: with a holder held before its write, hold up everything it
// sends to the resource; it gives up on its write after its write timeout,
// releases and exits; once another client has been granted the lock and
// has written, deliver the held-up write, wait until the resource has
// applied (or refused) it, and start a worker in the victim's place.
func delayWrite(ctx context.Context, c *cell) error {
	w, tok, from, err := c.inside(ctx)
	if err != nil {
		return err
	}
	delay := func(ctx context.Context) (func() error, error) { return w.resource.Delay(ctx, time.Hour) }
	err = c.pathFault(ctx, "resource-delay", w, tok, false, delay, func(bctx context.Context) error {
		select {
		case <-w.done:
		case <-bctx.Done():
			return fmt.Errorf("client %d never gave up on its delayed write: %w", w.client, bctx.Err())
		}
		if err := c.grantedOther(bctx, from, w.client, tok); err != nil {
			return err
		}
		return c.wroteOther(bctx, from, w.client)
	})
	if err != nil {
		return err
	}
	bctx, cancel := context.WithTimeout(ctx, c.bound())
	defer cancel()
	if _, _, err := c.hist.await(bctx, from, func(e Event) bool {
		return e.Op == OpApply && e.Client == w.client && e.Token == tok
	}); err != nil {
		return fmt.Errorf("the delayed write never reached the resource: %w", err)
	}
	return c.replaceExited(ctx)
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
	return c.pathFault(ctx, "blackhole", w, tok, true, w.lock.Blackhole, func(bctx context.Context) error {
		return c.grantedOther(bctx, from, w.client, tok)
	})
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
	nw, err := c.startWorker(w.spec)
	if err != nil {
		return err
	}
	if err := c.awaitOpened(ctx, nw); err != nil {
		return err
	}
	bctx, cancel := context.WithTimeout(ctx, c.bound())
	defer cancel()
	return c.grantedOther(bctx, from, w.client, tok)
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
	pause, resume, kind := c.srv.Pause, c.srv.Resume, "server-pause"
	if c.b.ensemble() {
		leader, _, err := c.leader(ctx)
		if err != nil {
			return err
		}
		pause, resume, kind = leader.Pause, leader.Resume, "leader-pause"
	}
	if err := pause(); err != nil {
		resume()
		return err
	}
	c.faultEv(kind, w.client, tok, Invoke)
	sleep(ctx, 2*c.b.TTL) // the fault's length, by definition
	if err := resume(); err != nil {
		return err
	}
	c.faultEv(kind, w.client, tok, OK)
	c.release()
	bctx, cancel := context.WithTimeout(ctx, c.bound())
	defer cancel()
	return c.grantedOther(bctx, from, w.client, tok)
}

// waiter returns a worker other than holder that is waiting in Lock (its
// last acquire has no answer yet), waiting for one up to the bound.
func (c *cell) waiter(ctx context.Context, holder int) (*workerProc, error) {
	bctx, cancel := context.WithTimeout(ctx, c.bound())
	defer cancel()
	for {
		from := c.hist.mark()
		evs := c.hist.snapshot()
		for _, w := range c.workers {
			if w.client == holder || w.exitedNow() {
				continue
			}
			if last := lastAcquire(evs, w.client); last != nil && last.Phase == Invoke {
				return w, nil
			}
		}
		if _, _, err := c.hist.await(bctx, from, func(e Event) bool { return e.Op == OpAcquire }); err != nil {
			return nil, fmt.Errorf("no client waiting in Lock: %w", err)
		}
	}
}

// holderAndWaiter gets a holder held before its write (see inside), and a
// waiter behind it, queued on the server where the backend queues. On
// error nothing is left held.
func (c *cell) holderAndWaiter(ctx context.Context) (h *workerProc, from int, w *workerProc, err error) {
	h, _, from, err = c.inside(ctx)
	if err != nil {
		return nil, 0, nil, err
	}
	if w, err = c.waiter(ctx, h.client); err == nil {
		err = c.awaitQueued(ctx)
	}
	if err != nil {
		c.release()
		return nil, 0, nil, err
	}
	return h, from, w, nil
}

// lastAcquire is client's last acquire event in evs, or nil.
func lastAcquire(evs []Event, client int) *Event {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Client == client && evs[i].Op == OpAcquire {
			return &evs[i]
		}
	}
	return nil
}

// pauseAcquirer: with a holder held before its write and the other client
// waiting, SIGSTOP the waiter, let the holder finish (the lock goes to the
// stopped waiter), wait for the lock to come back to the first client once
// the waiter's grant has expired, and SIGCONT the waiter.
func pauseAcquirer(ctx context.Context, c *cell) error {
	h, from, w, err := c.holderAndWaiter(ctx)
	if err != nil {
		return err
	}
	stop := func(context.Context) (func() error, error) {
		if err := w.signal(syscall.SIGSTOP); err != nil {
			return nil, err
		}
		return func() error { return w.signal(syscall.SIGCONT) }, nil
	}
	// The holder releases; the stopped waiter is granted the lock, cannot
	// renew it, and the holder gets it back after the TTL.
	return c.pathFault(ctx, "acquire-pause", w, 0, false, stop, c.regranted(from, h))
}

// cutWaiter: blackhole a waiter's path while the holder finishes, so that
// the lock is handed to a client that cannot hear of it or keep it; heal
// once the first client has the lock back.
func cutWaiter(ctx context.Context, c *cell) error {
	h, from, w, err := c.holderAndWaiter(ctx)
	if err != nil {
		return err
	}
	return c.pathFault(ctx, "waiter-cut", w, 0, false, w.lock.Blackhole, c.regranted(from, h))
}

// dropWaiterAnswers: drop every answer to a waiter while the holder
// finishes and for twice the TTL after; then heal.
func dropWaiterAnswers(ctx context.Context, c *cell) error {
	_, _, w, err := c.holderAndWaiter(ctx)
	if err != nil {
		return err
	}
	return c.pathFault(ctx, "acquire-answers-dropped", w, 0, false, w.lock.DropAnswers, func(bctx context.Context) error {
		sleep(bctx, 2*c.b.TTL) // the fault's length, by definition
		return nil
	})
}

// dropReleaseAnswer: drop every answer to the holder, so that its Unlock
// is applied but not answered; once another client has the lock, heal,
// and let the holder's cleanup retry.
func dropReleaseAnswer(ctx context.Context, c *cell) error {
	h, tok, from, err := c.inside(ctx)
	if err != nil {
		return err
	}
	return c.pathFault(ctx, "release-answer-dropped", h, tok, false, h.lock.DropAnswers, func(bctx context.Context) error {
		return c.grantedOther(bctx, from, h.client, tok)
	})
}

// clockNodes are the nodes whose clocks a clock fault moves: one RedLock
// master (the others keep the majority), every node otherwise.
func (c *cell) clockNodes() []*padlocktest.Node {
	if c.b.Kind == padlocktest.RedLock {
		return c.srv.Nodes()[:1]
	}
	return c.srv.Nodes()
}

// setClocks sets the clock of every node clockNodes names.
func (c *cell) setClocks(offset time.Duration, rate float64) error {
	c.clocksTouched = true
	var errs []error
	for _, n := range c.clockNodes() {
		errs = append(errs, n.SetClock(offset, rate))
	}
	return errors.Join(errs...)
}

// clockFault keeps a holder inside while a clock fault lasts: until
// another client is granted the lock or the holder's Done closes, or for
// twice the TTL at most (a RedLock holder may keep its majority). apply
// moves the clocks and returns what ends the fault.
func (c *cell) clockFault(ctx context.Context, kind string, apply func() (func() error, error)) error {
	w, tok, from, err := c.inside(ctx)
	if err != nil {
		return err
	}
	return c.pathFault(ctx, kind, w, tok, true, func(context.Context) (func() error, error) { return apply() },
		func(bctx context.Context) error {
			bctx, cancel := context.WithTimeout(bctx, 2*c.b.TTL)
			defer cancel()
			c.hist.await(bctx, from, func(e Event) bool {
				return e.Op == OpAcquire && e.Phase == OK && e.Client != w.client ||
					e.Op == OpLost && e.Client == w.client && e.Token == tok
			})
			return nil // either way: the outcome is measured
		})
}

// jumpClock: with a holder inside, jump the server's wall clock forward by
// ten TTLs (on top of earlier jumps: a clock that jumped stays jumped).
func jumpClock(ctx context.Context, c *cell) error {
	return c.clockFault(ctx, "clock-jump", func() (func() error, error) {
		c.clockOffset += 10 * c.b.TTL
		return func() error { return nil }, c.setClocks(c.clockOffset, 1)
	})
}

// fastClock: with a holder inside, make the server's wall clock run ten
// times too fast; the fault ends with the clock at its true pace again,
// keeping what it gained.
func fastClock(ctx context.Context, c *cell) error {
	const rate = 10
	return c.clockFault(ctx, "clock-fast", func() (func() error, error) {
		begin := time.Now()
		heal := func() error {
			c.clockOffset += time.Duration(float64(time.Since(begin)) * (rate - 1))
			return c.setClocks(c.clockOffset, 1)
		}
		return heal, c.setClocks(c.clockOffset, rate)
	})
}

// restartServer: kill and restart the lock server while a client holds
// the lock (one RedLock master; every node otherwise).
func restartServer(ctx context.Context, c *cell) error {
	h, tok, from, err := c.inside(ctx)
	if err != nil {
		return err
	}
	defer c.release()
	restart := c.srv.Restart
	switch {
	case c.b.Kind == padlocktest.RedLock:
		restart = c.srv.Nodes()[0].Restart
	case c.b.ensemble():
		leader, _, err := c.leader(ctx)
		if err != nil {
			c.release()
			return err
		}
		restart = leader.Restart
	}
	c.faultEv("server-restart", h.client, tok, Invoke)
	err = restart(ctx)
	c.faultEv("server-restart", h.client, tok, OK)
	if err != nil {
		return err
	}
	c.release()
	bctx, cancel := context.WithTimeout(ctx, c.bound())
	defer cancel()
	return c.grantedOther(bctx, from, h.client, tok)
}
