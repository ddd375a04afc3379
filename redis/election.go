package redis

import (
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock/backends"
)

// A candidacy is a writer's hold whose value lives beside its claim, in
// the name's values hash (field: the hold id), written by the very script
// that grants the lock or queues the candidate (elect.lua wraps the
// mutex's scripts), so the moment the candidacy holds the name its value
// is there to read. The leader is the lock key's live holder when the
// hash has a value for it; its token is the fencing counter. Proclaim
// (proclaim.lua) sets the value only while the lock key holds this
// hold's id, keeping every expiry. Watch listens on the wake-up channel
// the driver already has: releases publish there, and a candidacy's
// grant and a Proclaim publish electMsg.

var (
	_ backends.Elector    = (*driver)(nil)
	_ backends.Watcher    = (*driver)(nil)
	_ backends.Proclaimer = (*hold)(nil)
)

// electMsg is what a candidacy's grant and a Proclaim publish on the
// name's wake-up channel, for Watch. It is no hold id (those start with
// their identity's '{') nor "" (everyone: try again), so waiters ignore
// it.
const electMsg = "~elect"

// electArgs are elect.lua's arguments: the wrapped script's, then the
// value (acquire only), the wake-up channel and op.
func electArgs(k keys, op, value string, args ...any) []any {
	return append(args, value, k.channel, op)
}

// electAcquire is try's run of the acquire script for a candidacy: the
// mutex's (fair or not), storing the value with the grant or the place.
func (h *hold) electAcquire(ctx context.Context, c goredis.Scripter, fair, wait bool) ([]int64, error) {
	ttl := h.ttl.Milliseconds()
	if !fair && wait {
		// A refused try joins the waiters (acquire.lua).
		return electAcquireScript.Run(ctx, c, h.keys.electing(h.keys.acquire()),
			electArgs(h.keys, "acquire", h.req.Value, h.id, ttl, "1", ttl, h.place)...).Int64Slice()
	}
	if !fair {
		return electAcquireScript.Run(ctx, c, h.keys.electing(h.keys.acquire()),
			electArgs(h.keys, "acquire", h.req.Value, h.id, ttl)...).Int64Slice()
	}
	enqueue := "0"
	if wait {
		enqueue = "1"
	}
	return electFairAcquireScript.Run(ctx, c, h.keys.electing(h.keys.acquire()),
		electArgs(h.keys, "acquire", h.req.Value, h.id, ttl, enqueue, ttl)...).Int64Slice()
}

// renewCall is the script that renews h, with its keys and arguments: a
// candidacy's keeps its value as long as its lease.
// renewal is h's renewal as a batch takes it.
func (h *hold) renewal() renewOne {
	if h.req.Elect {
		script, keys, args := h.renewCall()
		return renewOne{script: script, keys: keys, args: args}
	}
	return plainRenewal(&h.keys, h.id, h.ttl)
}

func (h *hold) renewCall() (*goredis.Script, []string, []any) {
	if h.req.Elect {
		return electRenewScript, h.keys.electing(h.keys.renew()), electArgs(h.keys, "renew", "", h.id, h.ttl.Milliseconds())
	}
	return renewScript, h.keys.renew(), []any{h.id, h.ttl.Milliseconds()}
}

// releaseCall is the script that releases h, with its keys and arguments:
// a candidacy's removes its value too, and always tells the name's
// observers (Watch). registered (one server or a Cluster) says that every
// waiter of the name is in its waiters or fair queue: a release with none
// there wakes nobody. RedLock passes false and is as it was: a release
// with no waiter registered on its master publishes "".
func releaseCall(k keys, id string, elect, registered bool) (*goredis.Script, []string, []any) {
	if elect {
		return electReleaseScript, k.electing(k.release()), electArgs(k, "release", "", id, k.channel)
	}
	if registered {
		return releaseScript, k.release(), []any{id, k.channel, "", "", "registered"}
	}
	return releaseScript, k.release(), []any{id, k.channel}
}

// cancelCall is the script that takes h's place out of the fair queue,
// or (fair false) out of the non-fair waiters.
func (h *hold) cancelCall(fair bool) (*goredis.Script, []string, []any) {
	nonfair := "0"
	if !fair {
		nonfair = "1"
	}
	if h.req.Elect {
		return electCancelScript, h.keys.electing(h.keys.cancel()), electArgs(h.keys, "release", "", h.id, h.keys.channel, nonfair)
	}
	return cancelScript, h.keys.cancel(), []any{h.id, h.keys.channel, nonfair}
}

// Leader reads the name's holder and its value in one script on the
// primary (a Sentinel's or a cluster slot's master: never a replica).
func (d *driver) Leader(ctx context.Context, name string) (backends.Leader, bool, error) {
	ld, err := leaderOn(ctx, d.c, keysFor(d.prefix, name))
	if err != nil {
		return backends.Leader{}, false, requestError(ctx, "redis leader", err)
	}
	return ld.Leader, ld.id != "", nil
}

// leaderRead is one server's answer to leader.lua: id "" when it has no
// leader.
type leaderRead struct {
	backends.Leader
	id string
}

func leaderOn(ctx context.Context, c goredis.Scripter, k keys) (leaderRead, error) {
	res, err := leaderScript.Run(ctx, c, k.leader()).Slice()
	if err != nil {
		return leaderRead{}, err
	}
	if len(res) == 0 {
		return leaderRead{}, nil
	}
	id, _ := res[0].(string)
	v, _ := res[1].(string)
	token, _ := res[2].(int64)
	if len(res) != 4 || id == "" {
		return leaderRead{}, fmt.Errorf("redis leader script answered %v", res)
	}
	return leaderRead{Leader: backends.Leader{Value: v, Token: uint64(token)}, id: id}, nil
}

// Proclaim replaces the candidacy's value if the lock key still holds
// this hold's id (proclaim.lua); the lease is untouched.
func (h *hold) Proclaim(ctx context.Context, value string) error {
	n, err := proclaimScript.Run(ctx, h.c, h.keys.proclaim(), h.id, value, h.keys.channel).Int()
	if err != nil {
		return requestError(ctx, "redis proclaim", err)
	}
	if n == 0 {
		return h.gone()
	}
	return nil
}

// Watch subscribes to the name's wake-up channel on the Locker's one
// pub/sub connection (the waiters' own, wake.go) and signals on every
// message: a release, a grant or a Proclaim. It returns once the server
// acknowledged the subscription. After a broken connection go-redis
// subscribes again, and the second acknowledgement signals, since
// messages may have been lost meanwhile. A lease that runs out publishes
// nothing: Observe's polling sees it. The goroutine ends and the channel
// closes when ctx ends or the Locker closes.
func (d *driver) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	in := make(chan string, 1)
	sub, err := d.wake.subscribe(ctx, keysFor(d.prefix, name).channel, in)
	if err != nil {
		return nil, err
	}
	out := make(chan struct{}, 1)
	go forward(ctx, in, out, d.wake.done, func() { d.wake.unsubscribe(sub) })
	return out, nil
}

// forward signals out for each message on in until ctx ends or closed
// closes; it then calls done and closes out.
func forward(ctx context.Context, in <-chan string, out chan<- struct{}, closed <-chan struct{}, done func()) {
	defer close(out)
	defer done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-closed:
			return
		case <-in:
			select {
			case out <- struct{}{}:
			default: // one is pending already
			}
		}
	}
}
