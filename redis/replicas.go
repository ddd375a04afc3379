package redis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// replicaSync confirms acquisitions on replicas (wait_replicas=N) in
// groups, as a database commits transactions in groups: one WAIT for
// every acquisition that completed while the previous WAIT was out, not
// one per acquisition.
//
// WAIT blocks the connection it runs on until the replicas answer. With
// one WAIT per acquisition, a Locker taking many locks at once (32 in
// parallel, in the conformance suite's ManyLocks) had most of its pooled
// connections blocked in WAIT: on a loaded machine acquisitions then
// waited for a connection until their lease ran out (Lock returned "not
// held"), renewals of the holds already granted waited past their
// deadlines (the holds were lost), and WAITs ran into their timeout ("0 of
// 1 replicas acknowledged"). Now at most one connection waits for the
// replicas, and the replicas are asked once per round.
//
// WAIT counts only the writes of the connection it runs on, and an
// acquisition may have been written on another (a pooled connection, or in
// fair mode the releaser's). So each round renews every lock in it (a
// write of each hold's own, in one pipeline) and then sends WAIT, on one
// connection: replication is ordered, so a replica that has a renewal has
// the grant before it. WAIT goes on its own, not in the pipeline, so that
// go-redis reads its answer with a deadline past WAIT's timeout (a
// pipeline's is the client's read timeout, 5s by default, which a WAIT of
// half a 10s lease used to run into).
type replicaSync struct {
	c   conner
	n   int // replicas that must acknowledge
	ctx context.Context
	end context.CancelFunc
	wg  sync.WaitGroup

	mu      sync.Mutex
	queue   []*syncReq // for the next round
	running bool       // a goroutine runs rounds
	closed  bool
}

// conner is a client that lends out one of its connections (a
// *goredis.Client: wait_replicas is for a single primary, or Sentinel's).
type conner interface {
	Conn() *goredis.Conn
}

// syncReq is one acquisition waiting for its round.
type syncReq struct {
	h    *hold
	done chan syncResult // buffered: a round never waits for its caller
}

type syncResult struct {
	sent time.Time // when the round's renewal of the lock was sent
	err  error
}

func newReplicaSync(c conner, n int) *replicaSync {
	ctx, end := context.WithCancel(context.Background())
	return &replicaSync{c: c, n: n, ctx: ctx, end: end}
}

// confirm waits until h's lock is on n replicas, and returns when its
// lease was renewed for that: the hold's lease counts from then. It fails
// with ErrUnavailable if fewer replicas acknowledged it, or if its lease
// ran out before they did.
func (r *replicaSync) confirm(ctx context.Context, h *hold) (time.Time, error) {
	q := &syncReq{h: h, done: make(chan syncResult, 1)}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return time.Time{}, backends.ErrClosed
	}
	r.queue = append(r.queue, q)
	if !r.running {
		r.running = true
		r.wg.Add(1)
		go r.run()
	}
	r.mu.Unlock()
	// A lease that runs out meanwhile cannot be confirmed any more: say so
	// then, not when the rounds ahead of it are over.
	lapsed := time.NewTimer(time.Until(h.grant.Expiry()))
	defer lapsed.Stop()
	select {
	case res := <-q.done:
		return res.sent, res.err
	case <-lapsed.C:
		return time.Time{}, driverkit.Unavailable("redis wait for replicas",
			fmt.Errorf("the lease of %s ran out before the replicas confirmed it", h.keys.lock))
	case <-ctx.Done():
		// The round goes on for the others; the caller gives this
		// acquisition up, and its release does not wait for the round.
		return time.Time{}, driverkit.RequestError(ctx, "redis wait for replicas", context.Cause(ctx))
	}
}

// run runs rounds until nobody waits.
func (r *replicaSync) run() {
	defer r.wg.Done()
	for {
		r.mu.Lock()
		batch, closed := r.queue, r.closed
		r.queue = nil
		if len(batch) == 0 || closed {
			r.running = false
			r.mu.Unlock()
			for _, q := range batch {
				q.done <- syncResult{err: backends.ErrClosed}
			}
			return
		}
		r.mu.Unlock()
		r.round(batch)
	}
}

// round renews every lock of batch and waits for the replicas. WAIT may
// block for half the shortest lease in the batch: after that, what is left
// of the lease is too little to be worth the wait.
func (r *replicaSync) round(batch []*syncReq) {
	ttl := batch[0].h.ttl
	for _, q := range batch[1:] {
		ttl = min(ttl, q.h.ttl)
	}
	timeout := max(ttl/2, time.Millisecond)
	ctx, cancel := context.WithTimeoutCause(r.ctx, timeout+driverkit.DefaultRequestTimeout, driverkit.ErrNoAnswer)
	defer cancel()
	var (
		renewed []*goredis.Cmd
		sent    time.Time
		acked   int64
		werr    error
	)
	// A round is a renewal of each lock and a WAIT: run again, it does
	// the same. A connection that broke under it (closed by the client's
	// pool: "use of closed network connection", then "Conn is in a bad
	// state", seen on a loaded machine) gets the round once more on a
	// fresh one, while the leases allow.
	for attempt := 0; attempt < 2; attempt++ {
		renewed, sent, acked, werr = r.roundOn(ctx, batch, timeout)
		if werr == nil || !brokenConn(werr) || ctx.Err() != nil {
			break
		}
	}
	if werr == nil && acked < int64(r.n) {
		werr = fmt.Errorf("%d of %d replicas acknowledged the lock within %v", acked, r.n, timeout)
	}
	for i, q := range batch {
		res := syncResult{sent: sent}
		n, rerr := renewed[i].Int()
		switch {
		case rerr != nil:
			res.err = requestError(ctx, "redis wait for replicas", rerr)
		case n == 0:
			// Not ErrNotHeld: the acquisition has not completed, and
			// Lock never returns that.
			res.err = driverkit.Unavailable("redis wait for replicas",
				fmt.Errorf("the lease of %s ran out before the replicas confirmed it", q.h.keys.lock))
		case werr != nil:
			res.err = requestError(ctx, "redis wait for replicas", werr)
		}
		q.done <- res
	}
}

// roundOn sends one round's renewals and WAIT on a connection of its own.
func (r *replicaSync) roundOn(ctx context.Context, batch []*syncReq, timeout time.Duration) ([]*goredis.Cmd, time.Time, int64, error) {
	renewed := make([]*goredis.Cmd, len(batch))
	cn := r.c.Conn()
	defer cn.Close()
	sent := time.Now()
	_, err := cn.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, q := range batch {
			script, keys, args := q.h.renewCall()
			renewed[i] = script.Eval(ctx, p, keys, args...)
		}
		return nil
	})
	if err != nil {
		return renewed, sent, 0, err
	}
	acked, err := cn.Wait(ctx, r.n, timeout).Result()
	return renewed, sent, acked, err
}

// brokenConn reports whether a round failed because its connection broke
// under it (a connection error of the client's own), not
// because the server answered or time ran out.
func brokenConn(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "use of closed network connection") || strings.Contains(msg, "bad state") ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// close fails what waits, ends the round in flight and waits for it.
func (r *replicaSync) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.end()
	r.wg.Wait()
}
