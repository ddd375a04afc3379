package redis

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// renewChunk bounds how many holds one renew_many.lua call renews: the
// server runs nothing else while a script runs (a few microseconds a hold).
const renewChunk = 256

// renewManyScript runs renew.lua for several holds in one call
// (renew_many.lua, with renew_hold.lua's functions for each hold).
var renewManyScript = goredis.NewScript(renewingMany(renewManySrc))

// renewAnySlotScript is renewManyScript for a Redis Cluster's master
// (renew_any_slot.lua, Redis 7): one call renews holds of names on many
// slots, all of them this master's.
var renewAnySlotScript = goredis.NewScript(renewingMany(renewAnySlotSrc))

// renewingMany puts renew_hold.lua, with renew.lua in it at its line
// "-- renew.lua", into many (renew_many.lua or renew_any_slot.lua) at its
// line "-- functions".
func renewingMany(many string) string {
	return insertAt(many, "-- functions", insertAt(renewHoldSrc, "-- renew.lua", renewSrc))
}

// renewOne is one hold's renewal as a batch sees it: a plain hold's
// keys, id and lease, which may share a renew_many.lua call (its lock key
// and id there; renew.lua's three keys and two arguments in a call of its
// own), or another one's own script call (a candidacy's renewal).
type renewOne struct {
	plain bool
	k     *keys
	id    string
	ttl   int64 // milliseconds

	script *goredis.Script // not plain: its call
	keys   []string
	args   []any
}

// plainRenewal is the renewal of a plain hold of k, id and lease ttl.
func plainRenewal(k *keys, id string, ttl time.Duration) renewOne {
	return renewOne{plain: true, k: k, id: id, ttl: ttl.Milliseconds()}
}

// call is o's renewal as a call of its own.
func (o *renewOne) call() (*goredis.Script, []string, []any) {
	if o.plain {
		return renewScript, o.k.renew(), []any{o.id, o.ttl}
	}
	return o.script, o.keys, o.args
}

// renewCall is one script call of a batch, for the holds at idx: a call
// of its own (keys and args), or a shared call of many (line).
type renewCall struct {
	idx    []int
	script *goredis.Script
	many   bool // a renew_many.lua call: one answer for each hold of idx
	keys   []string
	args   []any
	line   []any // many: the whole EVALSHA command, nkeys keys first
	nkeys  int
	cmd    *goredis.Cmd
}

// queueRenewals queues the renewals of holds on p, one server's: the plain
// ones in calls of many (renewManyScript or renewAnySlotScript) of up to
// renewChunk holds, or each in a call of its own when many is nil (holds
// of a Cluster's slots sent through the cluster client); every other one
// (a candidacy's renewal) in a call of its own. A shared call is one
// EVALSHA command line whose keys and arguments point at each hold's own
// strings (a pointer goes into an interface with no allocation, where a
// string is copied into one): a renewal makes no garbage per hold beyond
// its place in the line. A shared call renews holds of one lease length,
// given once, and sends each hold's lock key and id only: the script names the other
// keys a reader's or permit's renewal needs from the lock key.
func queueRenewals(ctx context.Context, p goredis.Pipeliner, holds []renewOne, many *goredis.Script) []renewCall {
	var calls []renewCall
	var plain []int
	for i := range holds {
		if many != nil && holds[i].plain {
			plain = append(plain, i)
			continue
		}
		script, keys, args := holds[i].call()
		calls = append(calls, renewCall{idx: []int{i}, script: script, keys: keys, args: args})
	}
	// One shared call per lease length (the scripts take one), each
	// hold's lock key and id by pointer.
	slices.SortStableFunc(plain, func(a, b int) int { return cmp.Compare(holds[a].ttl, holds[b].ttl) })
	for len(plain) > 0 {
		n := 1
		for n < min(len(plain), renewChunk) && holds[plain[n]].ttl == holds[plain[0]].ttl {
			n++
		}
		idx := plain[:n:n]
		plain = plain[n:]
		c := renewCall{idx: idx, script: many, many: true}
		var ttl any = holds[idx[0]].ttl
		if many == renewAnySlotScript { // one key declared; the rest in ARGV
			c.nkeys = 1
			c.line = make([]any, 0, 5+2*len(idx))
			c.line = append(c.line, "evalsha", many.Hash(), c.nkeys, holds[idx[0]].k.lock, ttl)
			for _, i := range idx {
				o := &holds[i]
				c.line = append(c.line, &o.k.lock, &o.id)
			}
		} else {
			c.nkeys = len(idx)
			c.line = make([]any, 0, 4+2*len(idx))
			c.line = append(c.line, "evalsha", many.Hash(), c.nkeys)
			for _, i := range idx {
				c.line = append(c.line, &holds[i].k.lock)
			}
			c.line = append(c.line, ttl)
			for _, i := range idx {
				c.line = append(c.line, &holds[i].id)
			}
		}
		calls = append(calls, c)
	}
	for i := range calls {
		c := &calls[i]
		if c.many {
			c.cmd = p.Do(ctx, c.line...)
			continue
		}
		c.cmd = c.script.EvalSha(ctx, p, c.keys, c.args...)
	}
	return calls
}

// split returns a shared call's keys and arguments as a script call takes
// them, for the call that loads the script after a NOSCRIPT.
func (c *renewCall) split() ([]string, []any) {
	keys := make([]string, c.nkeys)
	for i, k := range c.line[3 : 3+c.nkeys] {
		switch k := k.(type) {
		case string:
			keys[i] = k
		case *string:
			keys[i] = *k
		}
	}
	return keys, c.line[3+c.nkeys:]
}

// renewAnswers reads the answers of calls queued by queueRenewals into
// each hold's value (1 renewed, 0 gone) or error, for n holds. A call that
// found the script cache flushed (NOSCRIPT) runs again on c, which loads it.
func renewAnswers(ctx context.Context, c goredis.Scripter, calls []renewCall, n int) ([]int64, []error) {
	vals, errs := make([]int64, n), make([]error, n)
	for _, call := range calls {
		cmd := call.cmd
		if err := cmd.Err(); err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
			keys, args := call.keys, call.args
			if call.many {
				keys, args = call.split()
			}
			cmd = call.script.Run(ctx, c, keys, args...)
		}
		if !call.many {
			vals[call.idx[0]], errs[call.idx[0]] = cmd.Int64()
			continue
		}
		vs, err := cmd.Int64Slice()
		if err == nil && len(vs) != len(call.idx) {
			err = errShortAnswer(len(vs), len(call.idx))
		}
		for j, i := range call.idx {
			if err != nil {
				errs[i] = err
				continue
			}
			vals[i] = vs[j]
		}
	}
	return vals, errs
}

// errShortAnswer is a renew_many.lua answer of the wrong length.
func errShortAnswer(got, want int) error {
	return fmt.Errorf("redis renew: %d answers for %d holds", got, want)
}
