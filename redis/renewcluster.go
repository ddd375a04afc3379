package redis

import (
	"context"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// renewCluster renews ones on the Cluster cc and returns each one's
// answer (1 renewed, 0 gone) or error. The names of a Locker's holds
// hash to different slots, and a script's keys must share one, so each
// hold would be a call of its own. Instead the plain holds are grouped by
// the master that serves their slots, and each master renews its group in
// renewAnySlotScript calls of up to renewChunk holds, the masters in
// parallel: what one server's renewals cost. A hold whose group failed
// (its slot moved since the client last read the slot map, a master
// failing over, a server before Redis 7) is renewed again in a call of
// its own through cc, which follows the cluster's redirections and
// learns its new map; so is a candidacy's.
func (d *driver) renewCluster(ctx context.Context, cc *goredis.ClusterClient, ones []renewOne) ([]int64, []error) {
	vals, errs := make([]int64, len(ones)), make([]error, len(ones))
	byMaster := map[*goredis.Client][]int{}
	var single []int
	for i, o := range ones {
		if !o.plain || d.perSlot.Load() {
			single = append(single, i)
			continue
		}
		m, err := cc.MasterForKey(ctx, o.k.lock)
		if err != nil {
			single = append(single, i)
			continue
		}
		byMaster[m] = append(byMaster[m], i)
	}
	var wg sync.WaitGroup
	for m, idx := range byMaster {
		wg.Go(func() { renewSome(ctx, m, ones, idx, renewAnySlotScript, vals, errs) })
	}
	wg.Wait()
	for _, idx := range byMaster {
		for _, i := range idx {
			if errs[i] == nil {
				continue
			}
			if strings.Contains(errs[i].Error(), "compiling script") {
				d.perSlot.Store(true) // no script flags: before Redis 7
			}
			single = append(single, i)
		}
	}
	if len(single) > 0 {
		renewSome(ctx, cc, ones, single, nil, vals, errs)
	}
	return vals, errs
}

// renewSome renews the holds of ones at idx through c (a master's client,
// or the cluster client), many as queueRenewals takes it, and puts each
// answer at its place in vals and errs.
func renewSome(ctx context.Context, c goredis.UniversalClient, ones []renewOne, idx []int, many *goredis.Script, vals []int64, errs []error) {
	group := make([]renewOne, len(idx))
	for j, i := range idx {
		group[j] = ones[i]
	}
	var calls []renewCall
	_, _ = c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		calls = queueRenewals(ctx, p, group, many)
		return nil
	})
	vs, es := renewAnswers(ctx, c, calls, len(group))
	for j, i := range idx {
		vals[i], errs[i] = vs[j], es[j]
	}
}
