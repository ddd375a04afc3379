package redis_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

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
	h.proxies.Keep(nil, p)
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

// harness gives every Locker its own ACL user on every node, so that Cut and
// Kill can disable that one client (and kill its connections) while the
// others go on.
type harness struct {
	t       *testing.T
	group   *padlocktest.Server
	scheme  string
	query   string
	prefix  string
	restart func(ctx context.Context) error
	ttl     time.Duration
	admin   []*goredis.Client

	mu      sync.Mutex
	users   map[*padlock.Locker]string
	clients []*goredis.ClusterClient // a cluster's Lockers' own clients
	all     []string

	proxies padlocktest.Proxies // each Locker's own, one per node (and OpenSilent's)
}

func newHarness(t *testing.T, g *padlocktest.Server, scheme, query string) *harness {
	h := &harness{t: t, group: g, scheme: scheme, query: query,
		prefix: fmt.Sprintf("t%d", prefixes.Add(1)), users: map[*padlock.Locker]string{}}
	for _, n := range g.Nodes() {
		h.admin = append(h.admin, goredis.NewClient(&goredis.Options{Addr: n.Addr}))
	}
	return h
}

func (h *harness) url(user, host string) string {
	q := "prefix=" + h.prefix
	if h.query != "" {
		q += "&" + h.query
	}
	path := "/"
	if h.scheme == "redis+sentinel" {
		// The Sentinel, and the master's name: the client finds the
		// primary, and follows it.
		host, path = h.group.Sentinels()[0].Addr, "/"+padlocktest.SentinelMaster
	}
	return fmt.Sprintf("%s://%s:pw@%s%s?%s", h.scheme, user, host, path, q)
}

// onAll runs one admin command on every node.
func (h *harness) onAll(ctx context.Context, args ...any) error {
	for _, a := range h.admin {
		if err := a.Do(ctx, args...).Err(); err != nil && !errors.Is(err, goredis.Nil) {
			return err
		}
	}
	return nil
}

func (h *harness) NewLocker(ctx context.Context, opts ...padlock.OpenOption) (*padlock.Locker, error) {
	h.mu.Lock()
	user := fmt.Sprintf("%s-u%d", h.prefix, len(h.all)+1)
	h.all = append(h.all, user)
	h.mu.Unlock()
	if err := h.setUser(ctx, user, "on", ">pw", "~*", "&*", "+@all"); err != nil {
		// The server is down (the ServerDown subtest): let Open report it.
		h.t.Logf("NewLocker: creating user %s: %v", user, err)
	}
	// A single instance and each RedLock master are reached through a
	// proxy per client, so that a silent partition (Blackhole) can be
	// injected too. A cluster client follows the addresses the nodes
	// announce, and a Sentinel client the primary's that Sentinel
	// announces: each gets a dialer that takes every address to the
	// client's own proxy for it.
	if h.scheme == "redis+cluster" {
		return h.clusterLocker(ctx, user, opts)
	}
	var addrs []string
	if h.scheme == "redis+sentinel" {
		addrs = nodeAddrs(h.group.Sentinels()...)
	}
	ps, via, err := proxyVia(append(addrs, nodeAddrs(h.group.Nodes()...)...))
	if err != nil {
		return nil, err
	}
	if h.scheme == "redis+sentinel" {
		opts = append(opts, padlock.WithDialer(viaDialer(via)))
	}
	// A Sentinel URL names the Sentinel itself (h.url), whom the dialer
	// reaches through its proxy.
	l, err := h.proxies.Open(ctx, func(addrs string) string { return h.url(user, addrs) }, ps, opts...)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.users[l] = user
	h.mu.Unlock()
	return l, nil
}

// nodeAddrs lists the nodes' addresses.
func nodeAddrs(ns ...*padlocktest.Node) []string {
	var addrs []string
	for _, n := range ns {
		addrs = append(addrs, n.Addr)
	}
	return addrs
}

// proxyVia starts a proxy in front of each address, and maps each address
// to its proxy's (for viaDialer).
func proxyVia(addrs []string) ([]*padlocktest.Proxy, map[string]string, error) {
	ps, err := padlocktest.ProxyEach(addrs...)
	if err != nil {
		return nil, nil, err
	}
	via := map[string]string{}
	for i, a := range addrs {
		via[a] = ps[i].Addr()
	}
	return ps, via, nil
}

// clusterLocker opens a Locker on the cluster through a go-redis cluster
// client of its own (redis.New), whose dialer reaches every node through
// this client's proxy for it.
func (h *harness) clusterLocker(ctx context.Context, user string, opts []padlock.OpenOption) (*padlock.Locker, error) {
	ps, to, err := proxyVia(nodeAddrs(h.group.Nodes()...))
	if err != nil {
		return nil, err
	}
	cli := goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs: []string{h.group.Nodes()[0].Addr}, Username: user, Password: "pw", ContextTimeoutEnabled: true,
		Dialer: viaDialer(to),
	})
	l, err := padredis.New(ctx, cli, padredis.Options{Prefix: h.prefix, Fair: strings.Contains(h.query, "fair=true")}, opts...)
	h.proxies.Keep(l, ps...) // closed with the harness, whatever New said
	if err != nil {
		cli.Close()
		return nil, err
	}
	h.mu.Lock()
	h.users[l] = user
	h.clients = append(h.clients, cli)
	h.mu.Unlock()
	return l, nil
}

func (h *harness) TTL() time.Duration { return h.ttl }

// State lists lock keys, fair-queue entries, readers and permits (one
// entry per hold), tokens of readers and permits that are not held, and
// values of candidacies that neither hold nor wait; fencing counters are kept on purpose and left out. A RedLock hold keeps
// one key (or member) per master: it is one entry, and one left on any
// master still shows.
func (h *harness) State(ctx context.Context) ([]string, error) {
	return stateOf(ctx, h.admin, h.prefix)
}

// stateOf is State on the nodes admins reach (every harness's).
func stateOf(ctx context.Context, admins []*goredis.Client, prefix string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(entry string) {
		if !seen[entry] {
			seen[entry] = true
			out = append(out, entry)
		}
	}
	for _, a := range admins {
		iter := a.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			key := iter.Val()
			switch {
			case strings.HasSuffix(key, ":lock"):
				add(key)
			case strings.HasSuffix(key, ":queue"), strings.HasSuffix(key, ":holds"):
				members, err := a.ZRange(ctx, key, 0, -1).Result()
				if err != nil {
					return nil, err
				}
				for _, m := range members {
					add(key + "/" + m)
				}
			case strings.HasSuffix(key, ":tokens"):
				members, err := a.ZRange(ctx, key, 0, -1).Result()
				if err != nil {
					return nil, err
				}
				holds := strings.TrimSuffix(key, ":tokens") + ":holds"
				for _, m := range members {
					if err := a.ZScore(ctx, holds, m).Err(); errors.Is(err, goredis.Nil) {
						add(key + "/" + m)
					} else if err != nil {
						return nil, err
					}
				}
			case strings.HasSuffix(key, ":values"):
				// A candidacy's value is its claim's or its place's: one
				// whose id neither holds the lock nor waits in the queue
				// is left behind.
				ids, err := a.HKeys(ctx, key).Result()
				if err != nil {
					return nil, err
				}
				base := strings.TrimSuffix(key, "values")
				holder, err := a.Get(ctx, base+"lock").Result()
				if err != nil && !errors.Is(err, goredis.Nil) {
					return nil, err
				}
				for _, id := range ids {
					err := a.ZScore(ctx, base+"queue", id).Err()
					if err != nil && !errors.Is(err, goredis.Nil) {
						return nil, err
					}
					if id != holder && err != nil {
						add(key + "/" + id)
					}
				}
			}
		}
		if err := iter.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (h *harness) userOf(l *padlock.Locker) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.users[l]
}

func (h *harness) Cut(ctx context.Context, l *padlock.Locker) (func() error, error) {
	user := h.userOf(l)
	if err := h.disable(ctx, user); err != nil {
		return nil, err
	}
	return func() error { return h.setUser(context.Background(), user, "on") }, nil
}

func (h *harness) Kill(ctx context.Context, l *padlock.Locker) error {
	return h.disable(ctx, h.userOf(l))
}

func (h *harness) Blackhole(ctx context.Context, l *padlock.Locker) (func() error, error) {
	return h.proxies.Blackhole(ctx, l)
}

// disable refuses the user's logins and kills its connections.
// setUser sets a user's rules on every node and saves them to the nodes'
// ACL files, so that a restarted node has its users before it takes a
// client (a client that came back first would be refused, for good).
func (h *harness) setUser(ctx context.Context, user string, rules ...any) error {
	if err := h.onAll(ctx, append([]any{"acl", "setuser", user}, rules...)...); err != nil {
		return err
	}
	return h.onAll(ctx, "acl", "save")
}

func (h *harness) disable(ctx context.Context, user string) error {
	if err := h.setUser(ctx, user, "off"); err != nil {
		return err
	}
	return h.onAll(ctx, "client", "kill", "user", user)
}

// RestartServer restarts every node without persistence: the holds are
// gone, and the users come back from the ACL files.
func (h *harness) RestartServer(ctx context.Context) error { return h.restart(ctx) }

// StopServer kills every node; starting them again is a restart without
// persistence, so the holds are gone and the users come back.
func (h *harness) StopServer(ctx context.Context) (func(context.Context) error, error) {
	for _, n := range h.group.Nodes() {
		if err := n.Kill(); err != nil {
			return nil, err
		}
	}
	return h.RestartServer, nil
}

// IgnoreLeaks leaves the harness's own goroutines (server log readers,
// toxiproxy links) out of the suite's leak check.
func (h *harness) IgnoreLeaks() []goleak.Option { return padlocktest.LeakIgnores() }

func (h *harness) Close() error {
	ctx := context.Background()
	var errs []error
	h.mu.Lock()
	users := h.all
	h.mu.Unlock()
	for _, u := range users {
		errs = append(errs, h.onAll(ctx, "acl", "deluser", u))
	}
	for _, a := range h.admin {
		errs = append(errs, a.Close())
	}
	h.mu.Lock()
	for _, c := range h.clients {
		c.Close()
	}
	h.mu.Unlock()
	h.proxies.Close()
	return errors.Join(errs...)
}

// commandCalls is how often the server behind c ran cmds (every command
// when none is named), from INFO commandstats.
func commandCalls(t *testing.T, c *goredis.Client, cmds ...string) int {
	t.Helper()
	n, err := padlocktest.RedisCommandCalls(context.Background(), c, cmds...)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// startStopped starts every node of g that a test stopped.
func startStopped(ctx context.Context, g *padlocktest.Server) error {
	for _, n := range g.Nodes() {
		if !n.Running() {
			if err := n.Start(ctx); err != nil {
				return fmt.Errorf("restart %s: %w", n.Addr, err)
			}
		}
	}
	return nil
}

// restartStopped gives the other tests g's nodes back once t is over: the
// nodes it stopped are started again (with a context of their own, t's
// being over by then).
func restartStopped(t *testing.T, g *padlocktest.Server) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := startStopped(ctx, g); err != nil {
			t.Error(err)
		}
	})
}
