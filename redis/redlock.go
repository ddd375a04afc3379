package redis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// redlock runs the RedLock algorithm over N independent masters: a hold
// needs a majority, and is valid for TTL − elapsed − drift.
type redlock struct {
	masters []*goredis.Client
	wakes   []*waker
	janitor *driverkit.Janitor
	prefix  string
	drift   float64
	quorum  int
	restart backends.Tristate // every master's answer (holdsSurviveRestart)

	closed    chan struct{} // closed by Close: ends WatchHolders' watches
	closeOnce sync.Once
}

func openRedLock(ctx context.Context, u *url.URL, cfg backends.Config) (backends.Driver, error) {
	routeLogs(cfg.Logger)
	if _, ok := u.Query()["fair"]; ok {
		return nil, fmt.Errorf("%w: redlock:// has no fair mode: independent masters cannot keep one queue", backends.ErrInvalidOption)
	}
	orig := *u
	c, own, err := takeParams(u, redlockParams)
	if err != nil {
		return nil, err
	}
	drift := DefaultDrift
	if v := own.Get("drift"); v != "" {
		if drift, err = strconv.ParseFloat(v, 64); err != nil || drift < 0 || drift >= 0.5 {
			return nil, fmt.Errorf("%w: drift=%q must be a factor in [0, 0.5)", backends.ErrInvalidOption, v)
		}
	}
	addrs, err := driverkit.Hosts(u, "6379")
	if err != nil {
		return nil, err
	}
	r := &redlock{prefix: c.prefix, drift: drift, quorum: len(addrs)/2 + 1, janitor: driverkit.NewJanitor(),
		closed: make(chan struct{})}
	for _, a := range addrs {
		opt := &goredis.Options{Addr: a, DialTimeout: time.Second, MaxRetries: -1, ContextTimeoutEnabled: true,
			DialerRetries: dialRetries}
		opt.Username, opt.Password = driverkit.Credentials(u)
		if err := tlsAndPassword(&orig, cfg, &opt.TLSConfig, &opt.Password, &opt.Dialer); err != nil {
			r.Close(ctx)
			return nil, err
		}
		if opt.TLSConfig != nil && opt.TLSConfig.ServerName == orig.Hostname() {
			// One URL names several masters: each verifies its own host.
			host, _, _ := net.SplitHostPort(a)
			opt.TLSConfig = opt.TLSConfig.Clone()
			opt.TLSConfig.ServerName = host
		}
		cli := goredis.NewClient(opt)
		r.masters = append(r.masters, cli)
		r.wakes = append(r.wakes, newWaker(cli))
	}
	// Open needs a quorum of masters, as every acquisition will.
	up := r.each(ctx, pingTimeout, func(ctx context.Context, m *goredis.Client) (int64, error) {
		return 1, m.Ping(ctx).Err()
	})
	if n := count(up, 1); n < r.quorum {
		r.Close(ctx)
		return nil, driverkit.Unavailable("redlock", fmt.Errorf("%d of %d masters answer, a quorum is %d: %w",
			n, len(addrs), r.quorum, errorsOf(up)))
	}
	// A hold may live on a bare majority, so every master's restart
	// counts: a master that forgot its share can give another client a
	// majority. (Antirez's alternative, restarting a master no sooner
	// than the longest lease, is an operator's practice padlock cannot
	// see.) A master down now is Unknown.
	answers := make([]backends.Tristate, len(r.masters))
	var wg sync.WaitGroup
	for i, m := range r.masters {
		wg.Go(func() {
			mctx, cancel := context.WithTimeout(ctx, pingTimeout)
			defer cancel()
			answers[i] = persists(mctx, m)
		})
	}
	wg.Wait()
	r.restart = everyone(answers)
	return r, nil
}

func (r *redlock) Capabilities() backends.Capabilities {
	return backends.Capabilities{Consistency: backends.AP, PushWakeup: true, DoneBeforeRegrant: true,
		HoldsSurviveRestart: r.restart, SharedLocks: true, Limits: true, Elections: true}
}

func (r *redlock) Close(ctx context.Context) error {
	r.closeOnce.Do(func() { close(r.closed) })
	errs := []error{r.janitor.Close(ctx)}
	for i, m := range r.masters {
		errs = append(errs, r.wakes[i].close(), m.Close())
	}
	return errors.Join(errs...)
}

// reply is one master's answer.
type reply struct {
	v   int64
	err error
}

// each runs f on every master in parallel, each call bounded by timeout.
func (r *redlock) each(ctx context.Context, timeout time.Duration, f func(context.Context, *goredis.Client) (int64, error)) []reply {
	return r.eachExcept(ctx, timeout, nil, f)
}

// eachExcept is each without the masters i where skip[i] (their reply is
// a zero answer).
func (r *redlock) eachExcept(ctx context.Context, timeout time.Duration, skip []bool, f func(context.Context, *goredis.Client) (int64, error)) []reply {
	return r.eachAt(ctx, timeout, skip, func(ctx context.Context, _ int, m *goredis.Client) (int64, error) { return f(ctx, m) })
}

// eachAt is eachExcept for an f that is told which master it runs on.
func (r *redlock) eachAt(ctx context.Context, timeout time.Duration, skip []bool, f func(context.Context, int, *goredis.Client) (int64, error)) []reply {
	out := make([]reply, len(r.masters))
	var wg sync.WaitGroup
	for i, m := range r.masters {
		if i < len(skip) && skip[i] {
			continue
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			v, err := f(cctx, i, m)
			out[i] = reply{v, err}
		})
	}
	wg.Wait()
	return out
}

// neverSent reports whether a master's error shows that the request never
// reached it: the connection for it could not be dialed (refused, say), or
// the write found the connection already closed on this side (a pooled
// connection that was closed under it: nothing of the request was
// written). Such a master ran nothing, so there is nothing on it to undo.
func neverSent(err error) bool {
	var op *net.OpError
	err = revealDial(err) // go-redis's dial failures come as dialError
	return errors.As(err, &op) && (op.Op == "dial" || op.Op == "write" && errors.Is(err, net.ErrClosed))
}

// onlySlow reports whether every master that gave no answer ran out of
// time (a slow master), rather than refusing or failing.
func onlySlow(rs []reply) bool {
	for _, r := range rs {
		if r.err == nil {
			continue
		}
		var ne net.Error
		if !errors.Is(r.err, context.DeadlineExceeded) && !(errors.As(r.err, &ne) && ne.Timeout()) {
			return false
		}
	}
	return true
}

// pause waits d, or until ctx is done; it reports whether ctx is still
// live.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func count(rs []reply, v int64) int {
	n := 0
	for _, r := range rs {
		if r.err == nil && r.v == v {
			n++
		}
	}
	return n
}

func errorsOf(rs []reply) error {
	var errs []error
	for _, r := range rs {
		if r.err != nil {
			errs = append(errs, revealDial(r.err))
		}
	}
	return errors.Join(errs...)
}

// nodeTimeout keeps one slow master from eating the validity: a tenth of
// the TTL, between 20ms and 1s.
func nodeTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl/10, 20*time.Millisecond), time.Second)
}

// validTTL is the part of the lease a hold may rely on, measured from the
// moment the first request was sent: TTL − (drift × TTL + 2ms).
func (r *redlock) validTTL(ttl time.Duration) time.Duration {
	return ttl - time.Duration(r.drift*float64(ttl)) - 2*time.Millisecond
}

func (r *redlock) Acquire(ctx context.Context, req backends.Request) (backends.Hold, error) {
	k := keysFor(r.prefix, req.Name)
	q := r.quorumFor(req.Mode, req.Limit)
	h := &redlockHold{r: r, keys: k, id: holdID(req, false), ttl: req.TTL, quorum: q, elect: req.Elect}
	// A waiter keeps one id and one place on each master while every round
	// tries under a hold id of its own (a round's undo may still run late
	// on a master: it must never touch a later round's grant). A release
	// wakes the first waiter on each master.
	wt := &redlockWaiter{id: h.id, places: make([]int64, len(r.masters)), in: make([]bool, len(r.masters)),
		pttls: make([]time.Duration, len(r.masters))}
	acquired := false
	defer func() {
		if req.Wait {
			r.leave(k, wt, req.TTL, acquired)
		}
	}()
	wake := make(chan string, 1)
	subscribed := false
	lastQuorum := time.Now()
	for {
		h.token = 0
		start := time.Now()
		rs := r.eachAt(ctx, nodeTimeout(req.TTL), nil, func(ctx context.Context, i int, m *goredis.Client) (int64, error) {
			res, err := r.try(ctx, m, k, h, req, wt.places[i], wt.id)
			switch {
			case err != nil:
				if req.Wait && !neverSent(err) {
					wt.in[i] = true // the try may have joined the waiters: leave cancels it
				}
				return 0, err
			case res[0] == 1:
				// A grant takes the waiter out when it knew its place; one
				// after a lost answer (place 0) may leave it in.
				wt.in[i] = wt.in[i] && wt.places[i] == 0
				h.noteToken(uint64(res[1]))
				return 1, nil
			case res[0] == -1:
				return -res[1], nil // another limit: minus that limit
			}
			wt.pttls[i] = time.Duration(res[1]) * time.Millisecond
			if req.Wait && (len(res) == 3 || len(res) == 5) {
				wt.places[i], wt.in[i] = res[len(res)-1], true // joined the waiters
			}
			return 0, nil
		})
		if other := mismatchOf(rs); other > 0 {
			h.releaseAll(rs)
			return nil, driverkit.LimitMismatch(req.Name, other, req.Limit)
		}
		// A hold that is (nearly) expired on arrival is no hold: keep at
		// least the renewal loop's safety margin.
		valid := r.validTTL(req.TTL) - time.Since(start)
		if count(rs, 1) >= q && valid > backends.SafetyMargin(r.validTTL(req.TTL)) {
			h.grant = backends.Grant{Sent: start, TTL: r.validTTL(req.TTL)}
			acquired = true
			if req.Wait && req.Mode != backends.Shared && req.Limit <= 1 && !req.Elect {
				r.settle(h, k, wt, rs)
			}
			return h, nil
		}
		// No quorum, or it took too long: undo on every master, and try
		// again (if at all) under a new hold id.
		// Split: it took some masters but not a quorum. (Waiting for a
		// wake-up instead when a quorum refused it, as if refused
		// everywhere, made the longest wait 4 times longer in the
		// benchmark's contended cell: the masters it took stay free for
		// clients that did not wait.)
		split := count(rs, 1) > 0
		late := count(rs, 1) >= q // a quorum granted it, with too little validity left
		h.releaseAll(rs)
		h = &redlockHold{r: r, keys: k, id: holdID(req, false), ttl: req.TTL, quorum: q, elect: req.Elect}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// Without a quorum of answers the lock cannot be had. Masters that
		// refused or failed are an outage, reported as such at once;
		// masters that were only slow to answer (a loaded host: the
		// per-master bound is a tenth of the TTL) get more rounds, until
		// no quorum has answered for DefaultRequestTimeout, the bound
		// every backend keeps.
		if answered := count(rs, 0) + count(rs, 1); answered < q {
			err := driverkit.Unavailable("redlock acquire", fmt.Errorf("%d of %d masters answered, a quorum is %d: %w",
				answered, len(rs), q, errorsOf(rs)))
			if !onlySlow(rs) || time.Since(lastQuorum) >= driverkit.DefaultRequestTimeout {
				return nil, err
			}
			if !pause(ctx, nodeTimeout(req.TTL)) {
				return nil, err
			}
			continue
		}
		lastQuorum = start
		switch {
		case late && !req.Wait:
			// The name was free: a try refused by nobody is no
			// ErrNotAcquired. The round took too long (a paused
			// process, a slow master): an outage of sorts.
			return nil, driverkit.Unavailable("redlock acquire", fmt.Errorf("a quorum granted it with %v of its validity left, less than the safety margin", valid.Round(time.Millisecond)))
		case late:
			continue // free: try again at once
		case !req.Wait:
			return nil, backends.ErrNotAcquired
		}
		if !subscribed {
			// Contended: a release on any master wakes us. Subscribe, then
			// try again at once, so that a release in between still counts,
			// unless every master's subscription was live before this
			// round was sent (waker.subscribeAs).
			subscribed = true
			live := true
			for _, w := range r.wakes {
				sub, ok, err := w.subscribeAs(ctx, k.channel, wake, wt.id, start)
				live = live && ok
				if err == nil {
					defer w.unsubscribe(sub)
					continue
				}
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
			}
			if !live || split {
				continue
			}
		}
		// A split round: try again after a jittered delay, so that the
		// clients that split the masters do not split them forever.
		// Refused everywhere, wait for a release to wake us, or for the
		// holder's lease to run out on a quorum of masters (at most a third
		// of our lease, which keeps our places from expiring).
		delay := time.Duration(rand.Int64N(int64(max(req.TTL/20, 10*time.Millisecond)))) + 5*time.Millisecond
		if !split {
			delay = max(min(wt.quorumFree(q), req.TTL/3), 5*time.Millisecond)
		}
		if !r.waitWake(ctx, wake, min(delay, req.TTL)) {
			return nil, ctx.Err()
		}
	}
}

// settle completes a waiting writer's hold, granted on a quorum, on the
// masters that refused it: in the background, once on each. A woken
// waiter's round often reaches a master before the old holder's release
// does, which leaves that master free once the release lands; any client
// that then tried would take it alone, split the masters, and undo and
// try again, and the hold's own release would wake nobody there. The
// settling try takes the master if it is free by now, and takes the
// waiter out of its waiters either way (acquire.lua, '2'); where the try
// fails, leave takes it out. Release waits for the tries, so that none
// takes a master after the hold's release.
func (r *redlock) settle(h *redlockHold, k keys, wt *redlockWaiter, rs []reply) {
	var refused []int
	for i, rp := range rs {
		if rp.err == nil && rp.v == 0 && wt.in[i] {
			refused = append(refused, i)
		}
	}
	if len(refused) == 0 {
		return
	}
	done := make(chan struct{})
	ttl := h.ttl.Milliseconds()
	if !r.janitor.Go(func(ctx context.Context) error {
		defer close(done)
		ctx, cancel := context.WithTimeout(ctx, nodeTimeout(h.ttl))
		defer cancel()
		var wg sync.WaitGroup
		failed := make([]bool, len(r.masters)) // each goroutine writes its own
		for _, i := range refused {
			wg.Go(func() {
				// Not retried: the hold may be released by then.
				failed[i] = acquireScript.Run(ctx, r.masters[i], k.acquire(), h.id, ttl, "2", ttl, wt.places[i], wt.id).Err() != nil
			})
		}
		wg.Wait()
		// A master where the settling try failed may still count the
		// waiter among its waiters, the next release's one wake-up sent to
		// nobody: leave them there as a waiter that is done does (cancel
		// takes nothing a grant holds, so it may land at any time).
		if slices.Contains(failed, true) {
			r.leave(k, &redlockWaiter{id: wt.id, in: failed}, h.ttl, true)
		}
		return nil
	}) {
		return // closing: the waiter's leave, if any, is not run either
	}
	for _, i := range refused {
		wt.in[i] = false // left by the settling try
	}
	h.settling = done
}

// redlockWaiter is a waiting Acquire's state on the masters.
type redlockWaiter struct {
	id     string          // the id it waits under: its first round's hold id
	places []int64         // its place among each master's waiters (0: none yet)
	in     []bool          // whether it is among each master's waiters now
	pttls  []time.Duration // how long each master's holders may keep the name
}

// quorumFree is how long until the holders' leases on a quorum of q
// masters may have run out.
func (w *redlockWaiter) quorumFree(q int) time.Duration {
	p := slices.Clone(w.pttls)
	slices.Sort(p)
	return p[min(q, len(p))-1]
}

// try runs one master's acquire script for h: a refused waiter joins the
// master's waiters under its waiter id, at its place.
func (r *redlock) try(ctx context.Context, m *goredis.Client, k keys, h *redlockHold, req backends.Request, place int64, wid string) ([]int64, error) {
	ttl := req.TTL.Milliseconds()
	switch {
	case req.Mode == backends.Shared || req.Limit > 1:
		join := "0"
		if req.Wait {
			join = "1"
		}
		return acquireSharedScript.Run(ctx, m, k.acquire(), h.id, ttl, "0", ttl,
			modeArg(req), max(req.Limit, 1), k.channel, join, place, wid).Int64Slice()
	case req.Elect && req.Wait:
		return electAcquireScript.Run(ctx, m, k.electing(k.acquire()),
			electArgs(k, "acquire", req.Value, h.id, ttl, "1", ttl, place, wid)...).Int64Slice()
	case req.Elect:
		return electAcquireScript.Run(ctx, m, k.electing(k.acquire()),
			electArgs(k, "acquire", req.Value, h.id, ttl)...).Int64Slice()
	case req.Wait:
		return acquireScript.Run(ctx, m, k.acquire(), h.id, ttl, "1", ttl, place, wid).Int64Slice()
	}
	return acquireScript.Run(ctx, m, k.acquire(), h.id, ttl).Int64Slice()
}

// leave takes a waiter that is done out of the masters' waiters it is
// still among (every master it may be among, if it did not acquire: a try
// whose answer was lost may have put it there), passing on a wake-up it
// was sent and did not use; in the background.
func (r *redlock) leave(k keys, wt *redlockWaiter, ttl time.Duration, acquired bool) {
	skip := make([]bool, len(r.masters))
	left := 0
	for i := range skip {
		if skip[i] = acquired && !wt.in[i]; !skip[i] {
			left++
		}
	}
	if left == 0 {
		return
	}
	// A place is pruned at its deadline, a TTL after the try that made it:
	// past that there is nothing left to cancel, and a master down that
	// long is not asked for ever (a task per waiting acquisition, each
	// asking the live masters again, while one master is down).
	until := time.Now().Add(ttl)
	r.janitor.Go(func(ctx context.Context) error {
		if !time.Now().Before(until) {
			return nil
		}
		rs := r.eachAt(ctx, nodeTimeout(ttl)*5, skip, func(ctx context.Context, _ int, m *goredis.Client) (int64, error) {
			return cancelScript.Run(ctx, m, k.cancel(), wt.id, k.channel, "1").Int64()
		})
		return settled(skip, rs)
	})
}

// settled marks in skip the masters that answered in rs, so that a retry
// asks only those that did not (the attempts of a janitor task run one
// after another), and returns their errors, if any did not.
func settled(skip []bool, rs []reply) error {
	failed := false
	for i, rp := range rs {
		switch {
		case skip[i]:
		case rp.err == nil:
			skip[i] = true
		default:
			failed = true
		}
	}
	if failed {
		return errorsOf(rs)
	}
	return nil
}

// waitWake waits for a wake-up on wake (not a candidacy's grant or Proclaim:
// no lock came free) or d, and reports false if ctx ended first.
func (r *redlock) waitWake(ctx context.Context, wake <-chan string, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case msg := <-wake:
			if msg != electMsg {
				return true
			}
		case <-t.C:
			return true
		}
	}
}

// redlockHold is a hold on a quorum of masters: a majority for a writer
// or a reader, more for a permit (quorumFor).
type redlockHold struct {
	r      *redlock
	keys   keys
	id     string
	ttl    time.Duration
	quorum int
	grant  backends.Grant
	elect  bool // a candidacy (Request.Elect)
	// settling is closed once the masters that refused the grant have
	// been tried again (redlock.settle); nil: none were.
	settling <-chan struct{}

	mu    sync.Mutex
	token uint64 // the highest per-master counter: NOT monotonic across holders
}

func (h *redlockHold) noteToken(t uint64) {
	h.mu.Lock()
	h.token = max(h.token, t)
	h.mu.Unlock()
}

func (h *redlockHold) Token() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.token
}

func (h *redlockHold) Grant() backends.Grant { return h.grant }

// Renew extends the lease on every master and needs a quorum of them.
func (h *redlockHold) Renew(ctx context.Context) (backends.Grant, error) {
	start := time.Now()
	script, keys, args := h.renewCall()
	rs := h.r.each(ctx, nodeTimeout(h.ttl), func(ctx context.Context, m *goredis.Client) (int64, error) {
		return script.Run(ctx, m, keys, args...).Int64()
	})
	return h.renewed(start, rs)
}

// renewed judges the masters' answers to one renewal sent at start.
func (h *redlockHold) renewed(start time.Time, rs []reply) (backends.Grant, error) {
	ok, gone := count(rs, 1), count(rs, 0)
	switch {
	case ok >= h.quorum && time.Since(start) < h.r.validTTL(h.ttl):
		return backends.Grant{Sent: start, TTL: h.r.validTTL(h.ttl)}, nil
	case gone > len(rs)-h.quorum:
		return backends.Grant{}, fmt.Errorf("%w: redlock: only %d of %d masters still hold it, a quorum is %d",
			backends.ErrNotHeld, ok, len(rs), h.quorum)
	}
	return backends.Grant{}, driverkit.Unavailable("redlock renew", fmt.Errorf("%d of %d masters, a quorum is %d: %w",
		ok, len(rs), h.quorum, errorsOf(rs)))
}

// RenewBatch renews holds with one pipelined round trip per master, in
// parallel, up to renewChunk holds in each script call (renew_many.lua).
func (r *redlock) RenewBatch(ctx context.Context, holds []backends.Hold) []backends.RenewResult {
	start := time.Now()
	// perMaster[m][i] is master m's answer for holds[i].
	perMaster := make([][]reply, len(r.masters))
	timeout := time.Second
	ones := make([]renewOne, len(holds))
	for i, bh := range holds {
		h := bh.(*redlockHold)
		timeout = min(timeout, nodeTimeout(h.ttl))
		ones[i] = h.renewal()
	}
	var wg sync.WaitGroup
	for mi, m := range r.masters {
		wg.Go(func() {
			mctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			var calls []renewCall
			_, _ = m.Pipelined(mctx, func(p goredis.Pipeliner) error {
				calls = queueRenewals(mctx, p, ones, renewManyScript)
				return nil
			})
			vals, errs := renewAnswers(mctx, m, calls, len(holds))
			answers := make([]reply, len(holds))
			for i := range answers {
				answers[i] = reply{vals[i], errs[i]}
			}
			perMaster[mi] = answers
		})
	}
	wg.Wait()
	out := make([]backends.RenewResult, len(holds))
	for i, bh := range holds {
		rs := make([]reply, len(r.masters))
		for mi := range r.masters {
			rs[mi] = perMaster[mi][i]
		}
		out[i].Grant, out[i].Err = bh.(*redlockHold).renewed(start, rs)
	}
	return out
}

func (h *redlockHold) Release(ctx context.Context) error {
	if h.settling != nil {
		select { // bounded by the settling tries' own deadline
		case <-h.settling:
		case <-ctx.Done():
		}
	}
	rs := h.r.each(ctx, nodeTimeout(h.ttl)*5, h.releaseOne)
	switch {
	case count(rs, 1) > 0:
		return nil // freed where it was held; unreachable masters expire it
	case count(rs, 0) == len(rs):
		return fmt.Errorf("%w: redlock: no master holds it", backends.ErrNotHeld)
	}
	return driverkit.Unavailable("redlock release", errorsOf(rs))
}

func (h *redlockHold) releaseOne(ctx context.Context, m *goredis.Client) (int64, error) {
	script, keys, args := releaseCall(h.keys, h.id, h.elect, false)
	return script.Run(ctx, m, keys, args...).Int64()
}

// undoOne is releaseOne for a round that failed, which wakes nobody: a
// master it frees alone grants no one a quorum, and the waiters it would
// wake are woken by the next release on the others.
func (h *redlockHold) undoOne(ctx context.Context, m *goredis.Client) (int64, error) {
	script, keys, args := releaseCall(h.keys, h.id, h.elect, false)
	if h.elect {
		args = electArgs(h.keys, "release", "", h.id, h.keys.channel, "", "", "quiet")
	} else {
		args = append(args, "", "", "quiet")
	}
	return script.Run(ctx, m, keys, args...).Int64()
}

// releaseAll undoes a failed attempt on every master that may have taken
// it: all but those whose reply in sent shows that the request never left
// (a refused dial), which would only be dialed again, or that the script
// ran and refused (an answer other than 1: nothing there to undo). The
// caller waits for
// the first round at most driverkit.CleanupWait; the janitor retries until
// every master has answered or the Locker closes (the keys then expire with
// their lease).
func (h *redlockHold) releaseAll(sent []reply) {
	skip := make([]bool, len(sent))
	left := len(h.r.masters)
	for i, r := range sent {
		if skip[i] = neverSent(r.err) || r.err == nil && r.v != 1; skip[i] {
			left--
		}
	}
	if left == 0 {
		return // no master ran the acquisition: nothing to undo
	}
	// The keys expire a TTL after the try: past that nothing is left to
	// undo, and a master down that long is not asked for ever.
	until := time.Now().Add(h.ttl)
	h.r.janitor.Settle(func(ctx context.Context) error {
		if !time.Now().Before(until) {
			return nil
		}
		return settled(skip, h.r.eachExcept(ctx, nodeTimeout(h.ttl)*5, skip, h.undoOne))
	})
}

// quorumFor is how many masters a hold needs. A writer and a reader need
// a majority: two majorities share a master, which admits no writer
// beside anyone. A permit of n needs more: each master admits at most n
// permits, and n+1 holders on q masters each are impossible only if
// (n+1)·q > N·n, so q = ⌊N·n/(n+1)⌋ + 1 (N=3, n=2: all 3; N=5, n=2: 4).
// It is never below a majority, and it nears N as n grows.
func (r *redlock) quorumFor(mode backends.Mode, limit int) int {
	if mode == backends.Shared || limit <= 1 {
		return r.quorum
	}
	n := len(r.masters)
	return max(n*limit/(limit+1)+1, r.quorum)
}

// mismatchOf is the limit a master answered the name is held or awaited
// with, when it is not the request's (negative answers), or 0.
func mismatchOf(rs []reply) int {
	for _, r := range rs {
		if r.err == nil && r.v < 0 {
			return int(-r.v)
		}
	}
	return 0
}

// Share turns the writer into a reader on every master it can reach
// (share.lua). The hold is then either on each: a writer keeps other
// writers out as a reader does, so it stays whole wherever the answer
// was lost, and Renew and Release find it in both states.
func (h *redlockHold) Share(ctx context.Context) (backends.Grant, error) {
	start := time.Now()
	token := h.Token()
	rs := h.r.each(ctx, nodeTimeout(h.ttl), func(ctx context.Context, m *goredis.Client) (int64, error) {
		return shareScript.Run(ctx, m, h.keys.acquire(), h.id, h.ttl.Milliseconds(), token, h.keys.channel).Int64()
	})
	return h.renewed(start, rs)
}
