package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock/backends"
)

// driver serves redis://, rediss:// and redis+cluster://: one client (a
// single instance or a cluster), one pub/sub connection for every wait.
type driver struct {
	c            goredis.UniversalClient
	prefix       string
	fair         bool
	waitReplicas int
	wake         *waker
	caps         backends.Capabilities
}

func (d *driver) Capabilities() backends.Capabilities { return d.caps }

func (d *driver) Close(context.Context) error {
	return errors.Join(d.wake.close(), d.c.Close())
}

func (d *driver) Acquire(ctx context.Context, req backends.Request) (backends.Hold, error) {
	k := keysFor(d.prefix, req.Name)
	h := &hold{c: d.c, keys: k, id: newID(), ttl: req.TTL}
	var sub *wakeSub
	if req.Wait {
		// Subscribe before the first try, so a release between the try and
		// the wait still wakes us.
		var err error
		if sub, err = d.wake.subscribe(ctx, k.channel, make(chan string, 1)); err != nil {
			return nil, err
		}
		defer d.wake.unsubscribe(sub)
	}
	for {
		sent := time.Now()
		ok, token, pttl, err := d.try(ctx, h, req.Wait)
		if err != nil {
			d.abandon(h, req.Wait)
			return nil, err
		}
		if ok {
			h.token, h.grant = token, backends.Grant{Sent: sent, TTL: req.TTL}
			if err := d.syncReplicas(ctx, h); err != nil {
				return nil, err
			}
			return h, nil
		}
		if !req.Wait {
			return nil, backends.ErrNotAcquired
		}
		if err := d.waitTurn(ctx, sub, h, req.TTL, pttl); err != nil {
			d.abandon(h, req.Wait)
			return nil, err
		}
	}
}

// try runs the acquire script once. In fair mode with wait it also joins
// the queue, or refreshes this waiter's place in it.
func (d *driver) try(ctx context.Context, h *hold, wait bool) (ok bool, token uint64, pttl time.Duration, err error) {
	var res []int64
	if d.fair {
		enqueue := "0"
		if wait {
			enqueue = "1"
		}
		res, err = fairAcquireScript.Run(ctx, d.c,
			[]string{h.keys.lock, h.keys.fence, h.keys.queue, h.keys.deadlines},
			h.id, h.ttl.Milliseconds(), enqueue, h.ttl.Milliseconds()).Int64Slice()
	} else {
		res, err = acquireScript.Run(ctx, d.c, []string{h.keys.lock, h.keys.fence}, h.id, h.ttl.Milliseconds()).Int64Slice()
	}
	if err != nil {
		return false, 0, 0, unavailable("acquire", err)
	}
	if res[0] == 1 {
		return true, uint64(res[1]), 0, nil
	}
	return false, 0, time.Duration(res[1]) * time.Millisecond, nil
}

// waitTurn blocks until a wake-up meant for us, the fallback timer, or ctx.
// The fallback is the holder's remaining lease, in case a message was lost;
// in fair mode it is at most a third of our place's lease, so the place is
// refreshed before it could be pruned.
func (d *driver) waitTurn(ctx context.Context, sub *wakeSub, h *hold, ttl, pttl time.Duration) error {
	wake := sub.c
	fallback := pttl
	switch {
	case d.fair && pttl <= 0:
		// Free, but an earlier waiter is first: it is woken, or pruned
		// when its place expires; refresh ours meanwhile.
		fallback = ttl / 3
	case d.fair:
		fallback = min(fallback, ttl/3)
	case pttl <= 0:
		fallback = 10 * time.Millisecond // freed just now: try again soon
	}
	t := time.NewTimer(fallback)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		case next := <-wake:
			if !d.fair || next == "" || next == h.id {
				return nil
			}
		}
	}
}

// abandon removes every trace of an acquisition that gives up: its place in
// the fair queue (waking the next waiter if the lock is free) and, if the
// last script's outcome is unknown, the lock it may have taken. Both scripts
// touch only this attempt's id. If the server cannot be reached, the place is
// pruned at its deadline and the lock expires with its lease.
func (d *driver) abandon(h *hold, waited bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if d.fair && waited {
		_ = cancelScript.Run(ctx, d.c, []string{h.keys.lock, h.keys.queue, h.keys.deadlines}, h.id, h.keys.channel).Err()
	}
	_ = h.Release(ctx)
}

// syncReplicas runs WAIT after an acquisition when wait_replicas is set.
// It narrows the window in which a failover loses the lock, without closing
// it: replication stays asynchronous.
func (d *driver) syncReplicas(ctx context.Context, h *hold) error {
	if d.waitReplicas == 0 {
		return nil
	}
	n, err := d.c.Do(ctx, "WAIT", d.waitReplicas, h.ttl.Milliseconds()/2).Int()
	if err == nil && n >= d.waitReplicas {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = h.Release(rctx)
	if err != nil {
		return unavailable("wait for replicas", err)
	}
	return fmt.Errorf("%w: redis: %d of %d replicas acknowledged the lock", backends.ErrUnavailable, n, d.waitReplicas)
}

// hold is one acquisition on one Redis (or one cluster slot).
type hold struct {
	c     goredis.Scripter
	keys  keys
	id    string
	ttl   time.Duration
	token uint64
	grant backends.Grant
}

func (h *hold) Token() uint64         { return h.token }
func (h *hold) Grant() backends.Grant { return h.grant }

func (h *hold) Renew(ctx context.Context) (backends.Grant, error) {
	sent := time.Now()
	n, err := renewScript.Run(ctx, h.c, []string{h.keys.lock}, h.id, h.ttl.Milliseconds()).Int()
	if err != nil {
		return backends.Grant{}, unavailable("renew", err)
	}
	if n == 0 {
		return backends.Grant{}, fmt.Errorf("%w: redis key %s no longer holds this lock", backends.ErrNotHeld, h.keys.lock)
	}
	return backends.Grant{Sent: sent, TTL: h.ttl}, nil
}

func (h *hold) Release(ctx context.Context) error {
	n, err := releaseScript.Run(ctx, h.c, []string{h.keys.lock, h.keys.queue, h.keys.deadlines}, h.id, h.keys.channel).Int()
	if err != nil {
		return unavailable("release", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: redis key %s no longer holds this lock", backends.ErrNotHeld, h.keys.lock)
	}
	return nil
}

// unavailable classifies a go-redis error.
func unavailable(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("redis %s: %w", op, err)
	}
	return fmt.Errorf("%w: redis %s: %v", backends.ErrUnavailable, op, err)
}
