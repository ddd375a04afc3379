package redis_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/padlocktest"
	padredis "github.com/padlock-go/padlock/redis"
)

// The package's tests share these server processes; each subtest works
// under its own key prefix and its own ACL users.
var (
	single, cluster, masters3, masters5, sentinel *padlocktest.Server
	startErr                                      error
	prefixes                                      atomic.Int64
)

// TestMain leaves go-redis's logger alone: padlock must keep it off stderr
// by itself (TestNothingOnStderr).
func TestMain(m *testing.M) {
	padlocktest.Main(m, func(ctx context.Context) (func(), error) {
		groups := []**padlocktest.Server{&single, &cluster, &masters3, &masters5, &sentinel}
		stop := func() {
			for _, g := range groups {
				if *g != nil {
					(*g).Close()
				}
			}
		}
		for _, start := range []func() error{
			func() (err error) {
				single, err = padlocktest.New(ctx, padlocktest.RedLock, padlocktest.Nodes(1))
				return
			},
			func() (err error) {
				cluster, err = padlocktest.New(ctx, padlocktest.RedisCluster, padlocktest.Nodes(3))
				return
			},
			func() (err error) {
				masters3, err = padlocktest.New(ctx, padlocktest.RedLock, padlocktest.Nodes(3))
				return
			},
			func() (err error) {
				masters5, err = padlocktest.New(ctx, padlocktest.RedLock, padlocktest.Nodes(5))
				return
			},
			func() (err error) {
				sentinel, err = padlocktest.New(ctx, padlocktest.RedisSentinel)
				return
			},
		} {
			if startErr = start(); startErr != nil {
				break
			}
		}
		return stop, startErr
	})
}

// needServers skips when redis-server is not installed, unless CI requires it
// (then TestMain has failed already).
func needServers(t *testing.T) {
	t.Helper()
	if startErr != nil {
		t.Skipf("redis servers not available: %v", startErr)
	}
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
	proxies map[*padlock.Locker][]*padlocktest.Proxy
	clients []*goredis.ClusterClient // a cluster's Lockers' own clients
	silent  []*padlocktest.Proxy     // OpenSilent's
	all     []string
}

func newHarness(t *testing.T, g *padlocktest.Server, scheme, query string) *harness {
	h := &harness{t: t, group: g, scheme: scheme, query: query,
		prefix: fmt.Sprintf("t%d", prefixes.Add(1)), users: map[*padlock.Locker]string{},
		proxies: map[*padlock.Locker][]*padlocktest.Proxy{}}
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
	host := h.group.Addrs()
	var ps []*padlocktest.Proxy
	closeAll := func() {
		for _, p := range ps {
			p.Close()
		}
	}
	if h.scheme == "redis+sentinel" {
		via := map[string]string{}
		for _, n := range append(h.group.Sentinels(), h.group.Nodes()...) {
			p, err := padlocktest.NewProxy(n.Addr)
			if err != nil {
				closeAll()
				return nil, err
			}
			ps = append(ps, p)
			via[n.Addr] = p.Addr()
		}
		opts = append(opts, padlock.WithDialer(viaDialer(via)))
	} else {
		var addrs []string
		for _, n := range h.group.Nodes() {
			p, err := padlocktest.NewProxy(n.Addr)
			if err != nil {
				closeAll()
				return nil, err
			}
			ps = append(ps, p)
			addrs = append(addrs, p.Addr())
		}
		host = strings.Join(addrs, ",")
	}
	l, err := padlock.Open(ctx, h.url(user, host), opts...)
	if err != nil {
		closeAll()
		return nil, err
	}
	h.mu.Lock()
	h.users[l] = user
	h.proxies[l] = ps
	h.mu.Unlock()
	return l, nil
}

// clusterLocker opens a Locker on the cluster through a go-redis cluster
// client of its own (redis.New), whose dialer reaches every node through
// this client's proxy for it.
func (h *harness) clusterLocker(ctx context.Context, user string, opts []padlock.OpenOption) (*padlock.Locker, error) {
	via := map[string]*padlocktest.Proxy{}
	var ps []*padlocktest.Proxy
	for _, n := range h.group.Nodes() {
		p, err := padlocktest.NewProxy(n.Addr)
		if err != nil {
			for _, p := range ps {
				p.Close()
			}
			return nil, err
		}
		via[n.Addr], ps = p, append(ps, p)
	}
	to := map[string]string{}
	for addr, p := range via {
		to[addr] = p.Addr()
	}
	cli := goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs: []string{h.group.Nodes()[0].Addr}, Username: user, Password: "pw", ContextTimeoutEnabled: true,
		Dialer: viaDialer(to),
	})
	l, err := padredis.New(ctx, cli, padredis.Options{Prefix: h.prefix, Fair: strings.Contains(h.query, "fair=true")}, opts...)
	if err != nil {
		cli.Close()
		for _, p := range ps {
			p.Close()
		}
		return nil, err
	}
	h.mu.Lock()
	h.users[l] = user
	h.proxies[l] = ps
	h.clients = append(h.clients, cli)
	h.mu.Unlock()
	return l, nil
}

func (h *harness) TTL() time.Duration { return h.ttl }

// State lists lock keys, fair-queue entries, readers and permits (one
// entry per hold), and tokens of readers and permits that are not held;
// fencing counters are kept on purpose and left out. A RedLock hold keeps
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
	h.mu.Lock()
	ps := h.proxies[l]
	h.mu.Unlock()
	var restores []func() error
	for _, p := range ps {
		restore, err := p.Blackhole(ctx)
		if err != nil {
			return nil, err
		}
		restores = append(restores, restore)
	}
	return func() error {
		var errs []error
		for _, r := range restores {
			errs = append(errs, r())
		}
		return errors.Join(errs...)
	}, nil
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
	for _, ps := range append(slices.Collect(maps.Values(h.proxies)), h.silent) {
		for _, p := range ps {
			p.Close()
		}
	}
	h.mu.Unlock()
	return errors.Join(errs...)
}

func runSuite(t *testing.T, g func() *padlocktest.Server, scheme, query string, isCluster bool, ttl time.Duration) {
	needServers(t)
	var prefixesUsed []string
	conformance.Run(t, func(t *testing.T) conformance.Harness {
		h := newHarness(t, g(), scheme, query)
		h.restart = g().Restart // a cluster's Restart waits for cluster_state:ok
		h.ttl = ttl
		prefixesUsed = append(prefixesUsed, h.prefix)
		return h
	})
	t.Run("NoKeyWithoutTTL", func(t *testing.T) { noKeyWithoutTTL(t, g(), prefixesUsed) })
}

// noKeyWithoutTTL checks that, after the suite, every key padlock wrote has
// an expiry, except the fencing counters, which are persistent on purpose.
func noKeyWithoutTTL(t *testing.T, g *padlocktest.Server, prefixes []string) {
	ctx := context.Background()
	seen := 0
	for _, n := range g.Nodes() {
		a := goredis.NewClient(&goredis.Options{Addr: n.Addr})
		for _, p := range prefixes {
			iter := a.Scan(ctx, 0, p+":*", 1000).Iterator()
			for iter.Next(ctx) {
				seen++
				key := iter.Val()
				if strings.HasSuffix(key, ":fence") {
					continue
				}
				if ttl := a.PTTL(ctx, key).Val(); ttl < 0 {
					t.Errorf("key %s has no expiry (PTTL %v)", key, ttl)
				}
			}
		}
		a.Close()
	}
	if seen == 0 && len(prefixes) > 10 {
		t.Error("the whole suite left no fencing counters: the scan looked in the wrong place")
	}
}

func TestConformanceSingle(t *testing.T) {
	runSuite(t, func() *padlocktest.Server { return single }, "redis", "", false, 2*time.Second)
}

func TestConformanceSingleFair(t *testing.T) {
	runSuite(t, func() *padlocktest.Server { return single }, "redis", "fair=true", false, 2*time.Second)
}

func TestConformanceCluster(t *testing.T) {
	runSuite(t, func() *padlocktest.Server { return cluster }, "redis+cluster", "fair=true", true, 2*time.Second)
}

// A primary and its replica behind Redis Sentinel, with each acquisition
// waiting for the replica (wait_replicas=1).
func TestConformanceSentinel(t *testing.T) {
	runSuite(t, func() *padlocktest.Server { return sentinel }, "redis+sentinel", "wait_replicas=1", false, 2*time.Second)
}

func TestConformanceRedLock(t *testing.T) {
	// Every RedLock renewal is a round trip to each master: 1,000 holds need
	// a longer lease than one instance does on a loaded 2-core machine.
	runSuite(t, func() *padlocktest.Server { return masters3 }, "redlock", "", false, 3*time.Second)
}
