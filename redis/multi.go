package redis

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// AcquireAll takes every name of reqs with one script (acquire_all.lua),
// or none: each name exactly as acquire.lua's free path takes it, with
// the same id, lease and fencing counter, so each hold is the one Acquire
// would have returned. It declines (ErrUnsupported, nothing sent) in fair
// mode, whose waiters keep places in each name's queue that one script
// over several queues would have to honour as the per-name path does;
// with wait_replicas, where each hold waits for its replicas on its own;
// on a Redis Cluster when the names' keys are on several slots, which no
// one script can reach; and over any client but go-redis's Client and
// ClusterClient, whose routing of a script it cannot tell.
func (d *driver) AcquireAll(ctx context.Context, reqs []backends.Request) ([]backends.Hold, error) {
	if d.fair || d.replicas != nil {
		return nil, fmt.Errorf("%w: redis: LockAll in one request with fair=true or wait_replicas", backends.ErrUnsupported)
	}
	hs := make([]*hold, len(reqs))
	keys := make([]string, 0, 5*len(reqs))
	args := make([]any, 1, 1+2*len(reqs))
	args[0] = reqs[0].TTL.Milliseconds()
	for i, req := range reqs {
		if req.TTL != reqs[0].TTL {
			return nil, fmt.Errorf("%w: redis: LockAll in one request with several leases", backends.ErrUnsupported)
		}
		k := keysFor(d.prefix, req.Name)
		hs[i] = &hold{c: d.c, keys: k, id: holdID(req, false), ttl: req.TTL, req: req}
		keys = append(keys, k.lock, k.fence, k.queue, k.holds, k.reserved)
		args = append(args, hs[i].id)
	}
	for _, h := range hs {
		args = append(args, h.keys.channel)
	}
	switch d.c.(type) {
	case *goredis.Client: // one server: a single instance, or Sentinel's primary
	case *goredis.ClusterClient:
		if !oneSlot(reqs) {
			return nil, fmt.Errorf("%w: redis cluster: the names are on several slots", backends.ErrUnsupported)
		}
	default:
		// A client that shards by key some other way (a Ring, say) would
		// run the script on the first key's shard, with keys of others.
		return nil, fmt.Errorf("%w: redis: LockAll in one request over a %T", backends.ErrUnsupported, d.c)
	}
	sent := time.Now()
	rctx, cancel := driverkit.WithRequestTimeout(ctx, 0)
	defer cancel()
	res, err := acquireAllScript.Run(rctx, d.c, keys, args...).Int64Slice()
	if err == nil && (len(res) == 0 || res[0] == 1 && len(res) != len(hs)+1) {
		err = fmt.Errorf("redis acquire_all script answered %v", res)
	}
	if err != nil {
		// The outcome is unknown: give back whatever it may have taken.
		err = requestError(rctx, "redis acquire all", err)
		tasks := make([]func(context.Context) error, len(hs))
		for i, h := range hs {
			tasks[i] = d.abandonTask(h, false)
		}
		d.janitor.SettleAll(tasks...) // a CleanupWait in all, not one per name
		return nil, err
	}
	if res[0] != 1 {
		return nil, backends.ErrNotAcquired
	}
	out := make([]backends.Hold, len(hs))
	for i, h := range hs {
		h.token, h.grant = uint64(res[i+1]), backends.Grant{Sent: sent, TTL: h.ttl}
		out[i] = h
	}
	return out, nil
}

// oneSlot reports whether every name of reqs has its keys on one Redis
// Cluster slot: the slot of a key is that of its hash tag, which
// keysFor makes the escaped name.
func oneSlot(reqs []backends.Request) bool {
	slot := driverkit.ClusterSlot(driverkit.EscapeName(reqs[0].Name, "{}"))
	for _, req := range reqs[1:] {
		if driverkit.ClusterSlot(driverkit.EscapeName(req.Name, "{}")) != slot {
			return false
		}
	}
	return true
}
