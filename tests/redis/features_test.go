package redis_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/padlocktest"
	padredis "github.com/padlock-go/padlock/redis"
)

// Every fault the suite knows, on both harnesses: one that stopped
// implementing one fails to compile here, and the suite fails a subtest
// whose fault is missing at run time.
var (
	_ conformance.Cutter       = (*harness)(nil)
	_ conformance.Killer       = (*harness)(nil)
	_ conformance.Restarter    = (*harness)(nil)
	_ conformance.Blackholer   = (*harness)(nil)
	_ conformance.Stopper      = (*harness)(nil)
	_ conformance.SilentOpener = (*harness)(nil)
	_ conformance.WaitWitness  = (*harness)(nil)

	_ conformance.Cutter       = (*tlsHarness)(nil)
	_ conformance.Killer       = (*tlsHarness)(nil)
	_ conformance.Restarter    = (*tlsHarness)(nil)
	_ conformance.Blackholer   = (*tlsHarness)(nil)
	_ conformance.Stopper      = (*tlsHarness)(nil)
	_ conformance.SilentOpener = (*tlsHarness)(nil)
	_ conformance.WaitWitness  = (*tlsHarness)(nil)
)

// viaDialer dials each address in via's keys at its value instead (a
// client's own proxy for each node), and refuses any other.
func viaDialer(via map[string]string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		to, ok := via[addr]
		if !ok {
			return nil, fmt.Errorf("no proxy for %s", addr)
		}
		return d.DialContext(ctx, network, to)
	}
}

// Waiting reports whether l's user has a subscribed connection on any
// node: a Locker subscribes to a name's wake-up channel when it waits
// for it (a RedLock client on every master, a Cluster client on the
// channel's node), and unsubscribes when the wait ends.
func (h *harness) Waiting(ctx context.Context, l *padlock.Locker) (bool, error) {
	return subscribed(ctx, h.admin, "user", h.userOf(l))
}

// subscribed reports whether a connection whose CLIENT LIST field is
// value, on any of the servers admins reach, is subscribed to a channel.
func subscribed(ctx context.Context, admins []*goredis.Client, field, value string) (bool, error) {
	for _, a := range admins {
		list, err := a.ClientList(ctx).Result()
		if err != nil {
			return false, err
		}
		for _, line := range strings.Split(list, "\n") {
			f := map[string]string{}
			for _, kv := range strings.Fields(line) {
				k, v, _ := strings.Cut(kv, "=")
				f[k] = v
			}
			subs := 0
			for _, k := range []string{"sub", "psub", "ssub"} {
				n, _ := strconv.Atoi(f[k]) // absent on older servers: 0
				subs += n
			}
			if f[field] == value && subs > 0 {
				return true, nil
			}
		}
	}
	return false, nil
}

// OpenSilent opens a Locker whose every connection goes to a silent
// endpoint (padlocktest.Silent): the nodes' addresses for a single
// instance and RedLock, Sentinel's for Sentinel, and a dialer that takes
// every node's there for a cluster client.
func (h *harness) OpenSilent(ctx context.Context, opts ...padlock.OpenOption) (*padlock.Locker, error) {
	n := len(h.group.Nodes())
	p, err := padlocktest.Silent(n)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.silent = append(h.silent, p)
	h.mu.Unlock()
	addrs := strings.Split(p.Addr(), ",")
	switch h.scheme {
	case "redis+cluster":
		to := map[string]string{}
		for i, node := range h.group.Nodes() {
			to[node.Addr] = addrs[i]
		}
		cli := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{h.group.Nodes()[0].Addr},
			Username: "silent", Password: "pw", ContextTimeoutEnabled: true, Dialer: viaDialer(to)})
		l, err := padredis.New(ctx, cli, padredis.Options{Prefix: h.prefix}, opts...)
		if err != nil {
			cli.Close()
			return nil, err
		}
		h.mu.Lock()
		h.clients = append(h.clients, cli)
		h.mu.Unlock()
		return l, nil
	case "redis+sentinel":
		u := fmt.Sprintf("redis+sentinel://silent:pw@%s/%s?prefix=%s&%s", addrs[0], padlocktest.SentinelMaster, h.prefix, h.query)
		return padlock.Open(ctx, u, opts...)
	}
	return padlock.Open(ctx, h.url("silent", p.Addr()), opts...)
}
