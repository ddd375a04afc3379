package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"
)

// A release is not safe to send twice. go-redis sends a request again on a
// fresh connection when its connection broke after the request went out
// (dial.go), and a release that the server had already run then finds its
// hold gone and answers 0: Unlock reported ErrNotHeld for a hold that it
// had just released, which tells the caller that the lock was lost under
// it. The acquisitions answer such a retry as granted (acquire.lua), and a
// renewal or a Share repeats harmlessly; a release has nothing left on the
// server to tell its own earlier run from a hold that ran out or was
// forced. So a release goes once: a broken connection is an unknown
// outcome (ErrUnavailable), which Unlock reports as such, and the release
// is asked again in the background, where a hold already gone ends it.

// onceCmd is a script call that go-redis sends at most once (no retry on
// a broken connection; redirects in a Cluster are no retries and still
// follow).
type onceCmd struct{ *goredis.Cmd }

// NoRetry tells go-redis not to send the command again.
func (onceCmd) NoRetry() bool { return true }

// processor is a client that runs any command: every go-redis client.
type processor interface {
	Process(ctx context.Context, cmd goredis.Cmder) error
}

// onceSources are the sources of the scripts that runOnce runs, for its
// EVAL (a goredis.Script does not tell its own).
var onceSources = map[*goredis.Script]string{
	releaseScript:      withLib(releaseSrc),
	electReleaseScript: electing(withLib(releaseSrc)),
}

// runOnce runs script (one of onceSources) as goredis.Script.Run does (EVALSHA, then EVAL on
// NOSCRIPT, which ran nothing), each request sent at most once.
func runOnce(ctx context.Context, c processor, script *goredis.Script, keys []string, args ...any) *goredis.Cmd {
	cmd := evalOnce(ctx, c, "evalsha", script.Hash(), keys, args)
	if err := cmd.Err(); err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
		src, ok := onceSources[script]
		if !ok {
			panic("padlock/redis: runOnce with a script that is not in onceSources")
		}
		cmd = evalOnce(ctx, c, "eval", src, keys, args)
	}
	return cmd
}

// evalOnce sends one EVAL or EVALSHA, as go-redis builds them.
func evalOnce(ctx context.Context, c processor, name, payload string, keys []string, args []any) *goredis.Cmd {
	all := make([]any, 0, 3+len(keys)+len(args))
	all = append(all, name, payload, len(keys))
	for _, k := range keys {
		all = append(all, k)
	}
	all = append(all, args...)
	cmd := onceCmd{goredis.NewCmd(ctx, all...)}
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	_ = c.Process(ctx, cmd)
	return cmd.Cmd
}
