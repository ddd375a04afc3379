package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// Elections on RedLock: each master keeps the candidacy's value beside
// its share of the claim, as a single Redis does (election.go). The
// leader is the id a majority of masters name, Proclaim needs a majority
// of masters to confirm the id still holds there, and Watch listens on
// every master.

var (
	_ backends.Elector    = (*redlock)(nil)
	_ backends.Watcher    = (*redlock)(nil)
	_ backends.Proclaimer = (*redlockHold)(nil)
)

// renewCall is the script that renews h on each master, with its keys and
// arguments.
// renewal is h's renewal as a batch takes it.
func (h *redlockHold) renewal() renewOne {
	if h.elect {
		script, keys, args := h.renewCall()
		return renewOne{script: script, keys: keys, args: args}
	}
	return plainRenewal(&h.keys, h.id, h.ttl)
}

func (h *redlockHold) renewCall() (*goredis.Script, []string, []any) {
	if h.elect {
		return electRenewScript, h.keys.electing(h.keys.renew()), electArgs(h.keys, "renew", "", h.id, h.ttl.Milliseconds())
	}
	return renewScript, h.keys.renew(), []any{h.id, h.ttl.Milliseconds()}
}

// Leader reads leader.lua on every master. The leader is the candidacy a
// majority of masters name, with the highest token among them (per-master
// counters: not monotonic), and the value a majority of masters agree on.
// A split is reported, not guessed at: with fewer than a majority
// answering, or when the masters that did not answer could still make an
// unnamed holder a majority, it is ErrUnavailable; when the masters that
// name the leader disagree on its value with no majority for one (a
// Proclaim that reached only some of them and reported ErrUnavailable),
// it is ErrUnavailable too, until the leader proclaims again.
func (r *redlock) Leader(ctx context.Context, name string) (backends.Leader, bool, error) {
	k := keysFor(r.prefix, name)
	n := len(r.masters)
	reads, errs := make([]leaderRead, n), make([]error, n)
	var wg sync.WaitGroup
	for i, m := range r.masters {
		wg.Go(func() { reads[i], errs[i] = leaderOn(ctx, m, k) })
	}
	wg.Wait()
	answered := 0
	for _, err := range errs {
		if err == nil {
			answered++
		}
	}
	if answered < r.quorum {
		return backends.Leader{}, false, driverkit.Unavailable("redlock leader", fmt.Errorf("%d of %d masters answered, a quorum is %d: %w",
			answered, n, r.quorum, errors.Join(errs...)))
	}
	ids := map[string]int{}
	best := ""
	for i, rd := range reads {
		if errs[i] == nil && rd.id != "" {
			ids[rd.id]++
			if ids[rd.id] > ids[best] {
				best = rd.id
			}
		}
	}
	if ids[best] < r.quorum {
		if ids[best]+n-answered >= r.quorum {
			return backends.Leader{}, false, driverkit.Unavailable("redlock leader", fmt.Errorf(
				"%d of %d masters answered and %d name one holder, a quorum is %d: %w",
				answered, n, ids[best], r.quorum, errors.Join(errs...)))
		}
		return backends.Leader{}, false, nil
	}
	var ld backends.Leader
	values := map[string]int{}
	for i, rd := range reads {
		if errs[i] == nil && rd.id == best {
			ld.Token = max(ld.Token, rd.Token)
			values[rd.Value]++
		}
	}
	for v, n := range values {
		if n >= r.quorum {
			ld.Value = v
			return ld, true, nil
		}
	}
	return backends.Leader{}, false, driverkit.Unavailable("redlock leader",
		fmt.Errorf("the %d masters that name the leader disagree on its value, none by a quorum of %d", ids[best], r.quorum))
}

// Proclaim writes the value on every master where the hold still holds
// (proclaim.lua). It succeeds when a majority confirm it; when too many
// masters say the hold is not theirs for a majority to remain (a
// majority, with an odd number of masters), the hold is deposed
// (ErrNotHeld), as Renew judges; otherwise the outcome is unknown
// (ErrUnavailable), and the leader may proclaim again.
func (h *redlockHold) Proclaim(ctx context.Context, value string) error {
	rs := h.r.each(ctx, nodeTimeout(h.ttl), func(ctx context.Context, m *goredis.Client) (int64, error) {
		return proclaimScript.Run(ctx, m, h.keys.proclaim(), h.id, value, h.keys.channel).Int64()
	})
	ok, gone := count(rs, 1), count(rs, 0)
	switch {
	case ok >= h.quorum:
		return nil
	case gone > len(rs)-h.quorum:
		return fmt.Errorf("%w: redlock: only %d of %d masters still hold it, a quorum is %d",
			backends.ErrNotHeld, ok, len(rs), h.quorum)
	}
	return driverkit.Unavailable("redlock proclaim", fmt.Errorf("%d of %d masters confirmed it, a quorum is %d: %w",
		ok, len(rs), h.quorum, errorsOf(rs)))
}

// Watch subscribes to the name's wake-up channel on every master and
// signals on a message from any. Every change of leader or value is
// written on a majority of masters, so a watch on a majority sees each:
// it fails only if fewer than a majority subscribed.
func (r *redlock) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	channel := keysFor(r.prefix, name).channel
	in := make(chan string, 1) // shared by the masters' subscriptions (wake.go allows it)
	var (
		subs []func()
		errs []error
	)
	for _, w := range r.wakes {
		sub, err := w.subscribe(ctx, channel, in)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		subs = append(subs, func() { w.unsubscribe(sub) })
	}
	done := func() {
		for _, unsubscribe := range subs {
			unsubscribe()
		}
	}
	if len(subs) < r.quorum {
		done()
		return nil, driverkit.Unavailable("redlock watch", fmt.Errorf("%d of %d masters subscribed, a quorum is %d: %w",
			len(subs), len(r.wakes), r.quorum, errors.Join(errs...)))
	}
	out := make(chan struct{}, 1)
	go forward(ctx, in, out, r.wakes[0].done, done)
	return out, nil
}
