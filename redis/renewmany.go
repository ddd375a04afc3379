package redis

import (
	"context"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// renewChunk bounds how many holds one renew_many.lua call renews: the
// server runs nothing else while a script runs (a few microseconds a hold).
const renewChunk = 256

// renewManyScript runs renew.lua for several holds in one call
// (renew_many.lua, with renew.lua as its per-hold function).
var renewManyScript = goredis.NewScript(renewingMany(renewSrc))

// renewingMany puts src into renew_many.lua at its line "-- body".
func renewingMany(src string) string {
	const mark = "\n-- body\n"
	if !strings.Contains(renewManySrc, mark) {
		panic("padlock/redis: renew_many.lua has no line \"-- body\"")
	}
	return strings.Replace(renewManySrc, mark, "\n"+src+"\n", 1)
}

// renewOne is one hold's renewal as a batch sees it: its script call, or
// (plain) its place in a renew_many.lua call.
type renewOne struct {
	script *goredis.Script
	keys   []string
	args   []any
	plain  bool // renew.lua's three keys and two arguments: may share a call
}

// renewCall is one script call of a batch, for the holds at idx.
type renewCall struct {
	idx    []int
	script *goredis.Script
	keys   []string
	args   []any
	cmd    *goredis.Cmd
}

// queueRenewals queues the renewals of holds on p, one server's: the plain
// ones in renew_many.lua calls of up to renewChunk holds when many (a
// single server, a Sentinel's primary, a RedLock master; not a Cluster,
// whose holds live on different slots), each other one in a call of its
// own (a candidacy's renewal).
func queueRenewals(ctx context.Context, p goredis.Pipeliner, holds []renewOne, many bool) []renewCall {
	var calls []renewCall
	var plain []int
	for i, h := range holds {
		if many && h.plain {
			plain = append(plain, i)
			continue
		}
		calls = append(calls, renewCall{idx: []int{i}, script: h.script, keys: h.keys, args: h.args})
	}
	for start := 0; start < len(plain); start += renewChunk {
		idx := plain[start:min(start+renewChunk, len(plain))]
		c := renewCall{idx: idx, script: renewManyScript,
			keys: make([]string, 0, 3*len(idx)), args: make([]any, 0, 2*len(idx))}
		for _, i := range idx {
			c.keys = append(c.keys, holds[i].keys...)
			c.args = append(c.args, holds[i].args...)
		}
		calls = append(calls, c)
	}
	for i := range calls {
		c := &calls[i]
		c.cmd = c.script.EvalSha(ctx, p, c.keys, c.args...)
	}
	return calls
}

// renewAnswers reads the answers of calls queued by queueRenewals into
// each hold's value (1 renewed, 0 gone) or error, for n holds. A call that
// found the script cache flushed (NOSCRIPT) runs again on c, which loads it.
func renewAnswers(ctx context.Context, c goredis.Scripter, calls []renewCall, n int) ([]int64, []error) {
	vals, errs := make([]int64, n), make([]error, n)
	for _, call := range calls {
		cmd := call.cmd
		if err := cmd.Err(); err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
			cmd = call.script.Run(ctx, c, call.keys, call.args...)
		}
		if call.script != renewManyScript {
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
