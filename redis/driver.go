package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// driver serves redis://, rediss://, redis+cluster:// and redis+sentinel://: one client (a
// single instance or a cluster), one pub/sub connection for every wait (on
// a cluster, one per master: wakers).
type driver struct {
	c        goredis.UniversalClient
	own      bool // Close closes c
	prefix   string
	fair     bool
	replicas *replicaSync // wait_replicas, if set
	wake     *wakers
	janitor  *driverkit.Janitor // removes what failed acquisitions left
	caps     backends.Capabilities
	// perSlot is set once a Cluster refused renewAnySlotScript (a
	// server before Redis 7): renewals then go one call per hold.
	perSlot atomic.Bool
}

// newDriver returns the driver over c, whose server reported restart (see
// holdsSurviveRestart).
func newDriver(c goredis.UniversalClient, own bool, o common, waitReplicas int, restart backends.Tristate) *driver {
	d := &driver{c: c, own: own, prefix: o.prefix, fair: o.fair,
		wake: newWakers(c), janitor: driverkit.NewJanitor(), caps: capabilities(o.fair, restart)}
	if waitReplicas > 0 {
		// Only openSingle and openSentinel take wait_replicas: c is a
		// *goredis.Client.
		d.replicas = newReplicaSync(c.(conner), waitReplicas)
	}
	return d
}

func (d *driver) Capabilities() backends.Capabilities { return d.caps }

func (d *driver) Close(ctx context.Context) error {
	errs := []error{d.janitor.Close(ctx), d.wake.close()}
	if d.replicas != nil {
		d.replicas.close()
	}
	if d.own {
		errs = append(errs, d.c.Close())
	}
	return errors.Join(errs...)
}

func (d *driver) Acquire(ctx context.Context, req backends.Request) (backends.Hold, error) {
	k := keysFor(d.prefix, req.Name)
	h := &hold{c: d.c, keys: k, id: holdID(req, d.fair), ttl: req.TTL, req: req}
	var sub *wakeSub
	defer func() {
		if sub != nil {
			d.wake.unsubscribe(sub)
		}
	}()
	// queued is when the last try that left us waiting in the fair queue
	// was sent. A release that grants us the lock runs after that try, so
	// a lease counted from it ends no later than the server's.
	var queued time.Time
	for {
		sent := time.Now()
		// Each try is bounded by the request timeout, whatever ctx says: a
		// waiting Lock's ctx may have no deadline, and go-redis's own
		// timeouts do not bound every path (a Sentinel client asks the
		// Sentinels for the primary before each dial, and again on failure).
		rctx, cancel := driverkit.WithRequestTimeout(ctx, 0)
		r, err := d.try(rctx, h, req.Wait)
		if err != nil {
			err = requestError(rctx, "redis acquire", err)
			cancel()
			if !queued.IsZero() || !neverSent(err) {
				// The try may have run, or an earlier one queued us.
				d.abandon(h, req.Wait)
			}
			return nil, err
		}
		cancel()
		if r.mismatch > 0 {
			// Nothing of this attempt is left but, after a refresh, its
			// place in the queue: leave it.
			if !queued.IsZero() {
				d.abandon(h, true)
			}
			return nil, driverkit.LimitMismatch(req.Name, r.mismatch, req.Limit)
		}
		if r.granted && !queued.IsZero() {
			// Granted by a release while we waited: the lease counts from
			// our last try that queued us. (A first try that was retried
			// after a lost answer and found its own grant is "granted"
			// too, with nothing queued: its own send time stands.)
			sent = queued
		}
		if r.ok || r.granted {
			return d.acquired(ctx, h, r.token, sent)
		}
		if !req.Wait {
			return nil, backends.ErrNotAcquired
		}
		queued = sent
		if sub == nil {
			// Contended: subscribe, then try again at once, so that a
			// release between the first try and the subscription still
			// counts; unless this client's subscription to the channel
			// was live before that try was sent, and every message since
			// has reached us (a non-fair waiter's wake-up names it: its
			// try joined the waiters). An uncontended Lock never
			// subscribes.
			var live bool
			since := sent
			if d.fair {
				since = time.Time{} // a grant's message needs the try that saw it
			}
			if sub, live, err = d.wake.subscribeAs(ctx, k.channel, make(chan string, 1), h.id, since); err != nil {
				d.abandon(h, true)
				return nil, err
			}
			if !live {
				continue
			}
		}
		token, granted, err := d.waitTurn(ctx, sub, h, req.TTL, r)
		if err != nil {
			d.abandon(h, req.Wait)
			return nil, err
		}
		if granted {
			// The release's message: no round trip. The renewal loop
			// renews at once if the grant has aged (off this path).
			return d.acquired(ctx, h, token, queued)
		}
	}
}

// acquired completes an acquisition whose lease was granted no earlier
// than sent.
func (d *driver) acquired(ctx context.Context, h *hold, token uint64, sent time.Time) (backends.Hold, error) {
	h.token, h.grant = token, backends.Grant{Sent: sent, TTL: h.ttl}
	if d.replicas == nil {
		return h, nil // no replica check: no bound to set up
	}
	// Bounded as each try is, and by the WAIT's own timeout on top.
	rctx, cancel := driverkit.WithRequestTimeout(ctx, h.ttl/2+driverkit.DefaultRequestTimeout)
	defer cancel()
	if err := d.syncReplicas(rctx, h); err != nil {
		d.abandon(h, false)
		return nil, err
	}
	return h, nil
}

// tryResult is what one run of the acquire script said.
type tryResult struct {
	ok      bool          // acquired by this run
	granted bool          // fair: a release granted it to us before this run
	token   uint64        // with ok or granted
	pttl    time.Duration // the holder's remaining lease, when not acquired
	fence   uint64        // fair, when not acquired: the fencing counter then
	// mismatch is the limit of the name's holders or waiters, when it is
	// not the request's (a writer's and a reader's is 1).
	mismatch int
}

// try runs the acquire script once. In fair mode with wait it also joins
// the queue, or refreshes this waiter's place in it.
func (d *driver) try(ctx context.Context, h *hold, wait bool) (tryResult, error) {
	var res []int64
	var err error
	if h.req.Mode == backends.Shared || h.req.Limit > 1 {
		enqueue, join := "0", "0"
		if wait && d.fair {
			enqueue = "1"
		} else if wait {
			join = "1"
		}
		res, err = acquireSharedScript.Run(ctx, d.c, h.keys.acquire(), h.id, h.ttl.Milliseconds(), enqueue,
			h.ttl.Milliseconds(), modeArg(h.req), max(h.req.Limit, 1), h.keys.channel, join, h.place).Int64Slice()
	} else if h.req.Elect {
		res, err = h.electAcquire(ctx, d.c, d.fair, wait)
	} else if d.fair {
		enqueue := "0"
		if wait {
			enqueue = "1"
		}
		res, err = fairAcquireScript.Run(ctx, d.c, h.keys.acquire(), h.id, h.ttl.Milliseconds(), enqueue, h.ttl.Milliseconds()).Int64Slice()
	} else if wait {
		// A refused try joins the waiters (or keeps its place there).
		res, err = acquireScript.Run(ctx, d.c, h.keys.acquire(), h.id, h.ttl.Milliseconds(), "1",
			h.ttl.Milliseconds(), h.place).Int64Slice()
	} else {
		res, err = acquireScript.Run(ctx, d.c, h.keys.acquire(), h.id, h.ttl.Milliseconds()).Int64Slice()
	}
	switch {
	case err != nil:
		return tryResult{}, err
	case len(res) < 2:
		return tryResult{}, fmt.Errorf("redis acquire script answered %v", res)
	case res[0] == -1:
		return tryResult{mismatch: int(res[1])}, nil
	case res[0] == 1 && len(res) > 2 && res[2] == 1:
		return tryResult{granted: true, token: uint64(res[1])}, nil
	case res[0] == 1:
		return tryResult{ok: true, token: uint64(res[1])}, nil
	}
	r := tryResult{pttl: time.Duration(res[1]) * time.Millisecond}
	switch {
	case !d.fair && (len(res) == 3 || len(res) == 5):
		h.place = res[len(res)-1] // joined the waiters (non-fair)
	case len(res) > 3:
		r.fence = uint64(res[3])
	}
	return r, nil
}

// waitTurn blocks until a wake-up meant for us, the fallback timer, or ctx.
// In fair mode the wake-up may be the grant itself: the release gave us
// the lock with this token. Outside fair mode it is a message naming us
// (a release woke us, the first of the waiters) or "" (everyone tries).
// The fallback is the holder's remaining lease, in case a message was
// lost, and at most a third of our place's lease, so the place is
// refreshed before it could be pruned (fair mode: a grant whose message
// was lost is found then) or the waiters key expire (non-fair).
func (d *driver) waitTurn(ctx context.Context, sub *wakeSub, h *hold, ttl time.Duration, last tryResult) (token uint64, granted bool, err error) {
	wake := sub.c
	pttl := last.pttl
	fallback := pttl
	switch {
	case d.fair && pttl <= 0:
		// Free, but an earlier waiter is first: it is woken, or pruned
		// when its place expires; refresh ours meanwhile.
		fallback = ttl / 3
	case pttl <= 0:
		fallback = 10 * time.Millisecond // freed just now: try again soon
	default:
		fallback = min(fallback, ttl/3)
	}
	t := time.NewTimer(fallback)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case <-t.C:
			return 0, false, nil
		case msg := <-wake:
			if msg == electMsg {
				continue // a candidacy's grant or Proclaim, for Watch
			}
			if msg == "" || msg == h.id {
				return 0, false, nil // everyone, or woken by name: try again
			}
			if !d.fair {
				continue // another waiter's wake-up
			}
			// A grant, "<id> <token>": the id may hold spaces (its
			// identity), the token none.
			sp := strings.LastIndexByte(msg, ' ')
			if sp < 0 || msg[:sp] != h.id {
				continue
			}
			// A grant made before our last try was answered may have run
			// out since (its message can trail that answer): only a token
			// above the counter that try saw is a grant made after it.
			if n, err := strconv.ParseUint(msg[sp+1:], 10, 64); err == nil && n > last.fence {
				return n, true, nil
			}
			return 0, false, nil // try again: the script finds a live grant
		}
	}
}

// abandon removes every trace of an acquisition that gives up: its place in
// the fair queue (waking the next waiter if the lock is free) or among the
// non-fair waiters (passing on a wake-up it may have been sent) and, if
// the last script's outcome is unknown, the lock it may have taken. Both
// scripts touch only this attempt's id. The caller waits for the first
// attempt at most driverkit.CleanupWait; the janitor retries after that. If
// the server cannot be reached until the Locker closes, the place is pruned
// at its deadline and the lock expires with its lease.
func (d *driver) abandon(h *hold, waited bool) {
	d.janitor.Settle(d.abandonTask(h, waited))
}

// abandonTask is abandon's clean-up, for the janitor: a multi-lock's
// names are settled side by side (driverkit.Janitor.SettleAll).
func (d *driver) abandonTask(h *hold, waited bool) func(context.Context) error {
	left := false
	return func(ctx context.Context) error {
		if waited && !left {
			script, keys, args := h.cancelCall(d.fair)
			if err := script.Run(ctx, d.c, keys, args...).Err(); err != nil {
				return err
			}
			left = true
		}
		return h.Release(ctx)
	}
}

// syncReplicas waits, when wait_replicas is set, until the replicas have
// the acquisition (see replicaSync); the hold's lease then counts from the
// renewal that round sent. It narrows the window in which a failover
// loses the lock, without closing it: replication stays asynchronous.
func (d *driver) syncReplicas(ctx context.Context, h *hold) error {
	if d.replicas == nil {
		return nil
	}
	sent, err := d.replicas.confirm(ctx, h)
	if err != nil {
		return err
	}
	h.grant.Sent = sent // the renewal's lease, not the older grant's
	return nil
}

// hold is one acquisition on one Redis (or one cluster slot): a writer's
// lock key, or a member of the name's readers and permits.
type hold struct {
	c     goredis.UniversalClient
	keys  keys
	id    string
	ttl   time.Duration
	req   backends.Request
	token uint64
	grant backends.Grant
	place int64 // non-fair: its place among the waiters (0: not there)
}

func (h *hold) Token() uint64 { return h.token }

// Follows implements backends.Successor: every grant of a name, a
// writer's, a reader's or a permit's, increments its fencing counter in
// the script that grants it, so the grant before this one has the token
// below. (RedLock's holds are not these.)
func (h *hold) Follows() (uint64, bool) { return h.token - 1, h.token > 1 }
func (h *hold) Grant() backends.Grant   { return h.grant }

func (h *hold) Renew(ctx context.Context) (backends.Grant, error) {
	sent := time.Now()
	script, keys, args := h.renewCall()
	n, err := script.Run(ctx, h.c, keys, args...).Int()
	return h.renewed(ctx, sent, n, err)
}

func (h *hold) renewed(ctx context.Context, sent time.Time, n int, err error) (backends.Grant, error) {
	if err != nil {
		return backends.Grant{}, requestError(ctx, "redis renew", err)
	}
	if n == 0 {
		return backends.Grant{}, h.gone()
	}
	return backends.Grant{Sent: sent, TTL: h.ttl}, nil
}

// RenewBatch renews holds in one pipelined round trip: on one server, up
// to renewChunk holds in each script call (renew_many.lua); on a Cluster,
// the holds of each master together (renewCluster).
func (d *driver) RenewBatch(ctx context.Context, holds []backends.Hold) []backends.RenewResult {
	ones := make([]renewOne, len(holds))
	for i, bh := range holds {
		ones[i] = bh.(*hold).renewal()
	}
	sent := time.Now()
	var vals []int64
	var errs []error
	if cc, ok := d.c.(*goredis.ClusterClient); ok {
		vals, errs = d.renewCluster(ctx, cc, ones)
	} else {
		var calls []renewCall
		_, _ = d.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			calls = queueRenewals(ctx, p, ones, renewManyScript)
			return nil
		})
		vals, errs = renewAnswers(ctx, d.c, calls, len(holds))
	}
	out := make([]backends.RenewResult, len(holds))
	for i, bh := range holds {
		out[i].Grant, out[i].Err = bh.(*hold).renewed(ctx, sent, int(vals[i]), errs[i])
	}
	return out
}

func (h *hold) Release(ctx context.Context) error {
	script, keys, args := releaseCall(h.keys, h.id, h.req.Elect, true)
	n, err := runOnce(ctx, h.c, script, keys, args...).Int() // once: once.go
	if err != nil {
		return requestError(ctx, "redis release", err)
	}
	if n == 0 {
		return h.gone()
	}
	return nil
}

// gone is the error of a hold the server no longer has.
func (h *hold) gone() error {
	return fmt.Errorf("%w: redis no longer has this hold of %q (%s)", backends.ErrNotHeld, h.req.Name, kindOf(h.req))
}
