package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncpool "github.com/go-redsync/redsync/v4/redis"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/driverkit"
	"github.com/padlock-go/padlock/redis"
)

// deleteIfOwner is the release of the wire floor (and of every Redis lock
// client): delete the key only if it still holds our value.
var deleteIfOwner = goredis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) end return 0`)

// fencedAcquire is the fenced floor's acquisition (RoleFencedFloor): the
// key if it is free, and the name's next token, in one script, as every
// fenced Redis lock must (a token taken outside it could come out of
// grant order). KEYS[1] the key, KEYS[2] the name's counter (one hash
// slot: both keys carry the name as their hash tag); ARGV[1] the value,
// ARGV[2] the lease in milliseconds. 0 when the key is held.
var fencedAcquire = goredis.NewScript(`if redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then return redis.call("incr", KEYS[2]) end return 0`)

// fencedKeys are the fenced floor's key and counter for name. The counter
// outlives the holds, as padlock's does (":fence", which Leftover does
// not count).
func fencedKeys(prefix, name string) []string {
	k := prefix + "{" + name + "}"
	return []string{k, k + ":fence"}
}

// floorTTL is the lease of the floors' keys.
const floorTTL = 10 * time.Second

// bsmRetry is bsm/redislock's retry: linear, at the first step of
// padlock's own back-off (a waiter that misses its wake-up polls after
// 10ms).
const bsmRetry = 10 * time.Millisecond

// redisGroup benchmarks one Redis server (redis://), a Redis Cluster
// (redis+cluster://) or the primary that Redis Sentinel names
// (redis+sentinel://s1:26379,…/master): padlock, fair padlock, redsync and
// bsm/redislock, over go-redis clients that count their round trips.
func redisGroup(ctx context.Context, u *url.URL) (*Group, error) {
	quietRedis()
	sentinel := u.Scheme == redis.SchemeSentinel
	port := "6379"
	if sentinel {
		port = "26379"
	}
	addrs, err := driverkit.Hosts(u, port)
	if err != nil {
		return nil, err
	}
	user, pass := driverkit.Credentials(u)
	cluster := u.Scheme == redis.SchemeCluster
	master := strings.Trim(u.Path, "/")
	if sentinel && (master == "" || strings.Contains(master, "/")) {
		return nil, fmt.Errorf("%w: redis+sentinel:// needs the master's name as its path", padlock.ErrInvalidURL)
	}
	connect := func(rt *Counter) goredis.UniversalClient {
		var dial func(ctx context.Context, network, addr string) (net.Conn, error)
		if rt != nil {
			dial = rt.Dial
		}
		switch {
		case cluster:
			return goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs, Username: user, Password: pass, Dialer: dial, ContextTimeoutEnabled: true})
		case sentinel:
			return goredis.NewFailoverClient(&goredis.FailoverOptions{MasterName: master, SentinelAddrs: addrs, Username: user, Password: pass, Dialer: dial, ContextTimeoutEnabled: true})
		}
		return goredis.NewClient(&goredis.Options{Addr: addrs[0], Username: user, Password: pass, Dialer: dial, ContextTimeoutEnabled: true})
	}
	admin := connect(nil)
	if err := admin.Ping(ctx).Err(); err != nil {
		admin.Close()
		return nil, fmt.Errorf("bench: %s %s: %w", u.Scheme, u.Host, err)
	}
	with := func(f func(ctx context.Context, cli goredis.UniversalClient, prefix string) (Client, error)) func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
		return func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
			cli := connect(rt)
			c, err := f(ctx, cli, prefix)
			if err != nil {
				cli.Close()
				return nil, err
			}
			return c, nil
		}
	}
	backend, servers := "redis", addrs
	switch {
	case cluster:
		backend = "redis-cluster"
	case sentinel:
		// The servers whose CPU counts are the primary's, not Sentinel's.
		backend = "redis-sentinel"
		sc := goredis.NewSentinelClient(&goredis.Options{Addr: addrs[0]})
		hp, err := sc.GetMasterAddrByName(ctx, master).Result()
		sc.Close()
		servers = nil
		if err == nil && len(hp) == 2 {
			servers = []string{net.JoinHostPort(hp[0], hp[1])}
		}
	}
	g := &Group{Backend: backend, URL: redacted(u), Servers: servers, Close: admin.Close}
	padlockImpl := func(name string, fair bool) Impl {
		return Impl{Name: name, Role: RolePadlock, MinRT: 2, Waits: true, Tokens: true, Recipes: allRecipes, New: with(func(ctx context.Context, cli goredis.UniversalClient, prefix string) (Client, error) {
			l, err := redis.New(ctx, cli, redis.Options{Prefix: prefix, Fair: fair})
			if err != nil {
				return nil, err
			}
			return padlockClient(l, cli.Close), nil
		})}
	}
	redsyncImpl := func(name string, opts ...redsync.Option) Impl {
		return Impl{Name: name, Role: RolePeer, MinRT: 2, Waits: true, GivesUp: len(opts) == 0, New: with(func(ctx context.Context, cli goredis.UniversalClient, prefix string) (Client, error) {
			return redsyncClient(redsync.New(redsyncgoredis.NewPool(cli)), prefix, cli.Close, opts...), nil
		})}
	}
	g.Impls = []Impl{
		{Name: "rtt", Role: RoleRTT, MinRT: 1, New: with(func(ctx context.Context, cli goredis.UniversalClient, prefix string) (Client, error) {
			return funcClient{lock: func(ctx context.Context, name string) (Held, error) {
				return Held{Release: noRelease}, cli.Ping(ctx).Err()
			}, close: cli.Close}, nil
		})},
		{Name: "floor", Role: RoleFloor, MinRT: 2, New: with(func(ctx context.Context, cli goredis.UniversalClient, prefix string) (Client, error) {
			if err := deleteIfOwner.Load(ctx, cli).Err(); err != nil {
				return nil, err
			}
			return funcClient{lock: func(ctx context.Context, name string) (Held, error) {
				k, v := prefix+name, newValue()
				ok, err := cli.SetNX(ctx, k, v, floorTTL).Result()
				switch {
				case err != nil:
					return Held{}, err
				case !ok:
					return Held{}, errBusy(name)
				}
				return Held{Release: func(ctx context.Context) error {
					return deleteIfOwner.EvalSha(ctx, cli, []string{k}, v).Err()
				}}, nil
			}, close: cli.Close}, nil
		})},
		{Name: "floor-fenced", Role: RoleFencedFloor, MinRT: 2, Tokens: true, New: with(func(ctx context.Context, cli goredis.UniversalClient, prefix string) (Client, error) {
			for _, sc := range []*goredis.Script{fencedAcquire, deleteIfOwner} {
				if err := sc.Load(ctx, cli).Err(); err != nil {
					return nil, err
				}
			}
			return funcClient{lock: func(ctx context.Context, name string) (Held, error) {
				keys, v := fencedKeys(prefix, name), newValue()
				token, err := fencedAcquire.EvalSha(ctx, cli, keys, v, floorTTL.Milliseconds()).Int64()
				switch {
				case err != nil:
					return Held{}, err
				case token == 0:
					return Held{}, errBusy(name)
				}
				return Held{Token: uint64(token), Release: func(ctx context.Context) error {
					return deleteIfOwner.EvalSha(ctx, cli, keys[:1], v).Err()
				}}, nil
			}, close: cli.Close}, nil
		})},
		padlockImpl("padlock", false),
		padlockImpl("padlock-fair", true),
		redsyncImpl("redsync"),
		redsyncImpl("redsync-10ms", redsync.WithRetryDelay(10*time.Millisecond), redsync.WithTries(math.MaxInt32)),
		{Name: "bsm-redislock", Role: RolePeer, MinRT: 2, Waits: true, New: with(func(ctx context.Context, cli goredis.UniversalClient, prefix string) (Client, error) {
			c := redislock.New(cli)
			opt := &redislock.Options{RetryStrategy: redislock.LinearBackoff(bsmRetry)}
			return funcClient{lock: func(ctx context.Context, name string) (Held, error) {
				lk, err := c.Obtain(ctx, prefix+name, floorTTL, opt)
				if err != nil {
					return Held{}, err
				}
				return Held{Release: lk.Release}, nil
			}, close: cli.Close}, nil
		})},
	}
	g.Impls = withBefore(g.Impls, func(im Impl) (func(ctx context.Context, rt *Counter, prefix string) (Client, error), bool) {
		fair := im.Name == "padlock-fair"
		return with(func(ctx context.Context, cli goredis.UniversalClient, prefix string) (Client, error) {
			return beforeRedis(ctx, cli, prefix, fair)
		}), beforeRedis != nil
	})
	g.Leftover = func(ctx context.Context, prefix string) (int, error) {
		if c, ok := admin.(*goredis.ClusterClient); ok {
			var mu sync.Mutex
			n := 0
			err := c.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
				k, err := deletePrefix(ctx, m, prefix)
				mu.Lock()
				n += k
				mu.Unlock()
				return err
			})
			return n, err
		}
		c, ok := admin.(*goredis.Client) // one server, or Sentinel's primary
		if !ok {
			return 0, fmt.Errorf("bench: no way to scan %T", admin)
		}
		return deletePrefix(ctx, c, prefix)
	}
	return g, nil
}

// redlockGroup benchmarks RedLock over independent masters: padlock's
// redlock:// and redsync over one pool per master. Round trips are counted
// per master: the minimum is one request to each to lock and one to
// unlock.
func redlockGroup(ctx context.Context, u *url.URL) (*Group, error) {
	addrs, err := driverkit.Hosts(u, "6379")
	if err != nil {
		return nil, err
	}
	user, pass := driverkit.Credentials(u)
	quietRedis()
	connect := func(rt *Counter) []*goredis.Client {
		var dial func(ctx context.Context, network, addr string) (net.Conn, error)
		if rt != nil {
			dial = rt.Dial
		}
		var cs []*goredis.Client
		for _, a := range addrs {
			cs = append(cs, goredis.NewClient(&goredis.Options{Addr: a, Username: user, Password: pass, Dialer: dial, ContextTimeoutEnabled: true}))
		}
		return cs
	}
	closeAll := func(cs []*goredis.Client) func() error {
		return func() error {
			var errs []error
			for _, c := range cs {
				errs = append(errs, c.Close())
			}
			return errors.Join(errs...)
		}
	}
	admin := connect(nil)
	for _, c := range admin {
		if err := c.Ping(ctx).Err(); err != nil {
			closeAll(admin)()
			return nil, fmt.Errorf("bench: redlock %s: %w", c.Options().Addr, err)
		}
	}
	n := len(addrs)
	g := &Group{Backend: "redlock", URL: redacted(u), Servers: addrs, Close: closeAll(admin)}
	redsyncImpl := func(name string, opts ...redsync.Option) Impl {
		return Impl{Name: name, Role: RolePeer, MinRT: 2 * n, Waits: true, GivesUp: len(opts) == 0, New: func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
			cs := connect(rt)
			var pools []redsyncpool.Pool
			for _, c := range cs {
				pools = append(pools, redsyncgoredis.NewPool(c))
			}
			return redsyncClient(redsync.New(pools...), prefix, closeAll(cs), opts...), nil
		}}
	}
	g.Impls = []Impl{
		{Name: "rtt", Role: RoleRTT, MinRT: n, New: func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
			cs := connect(rt)
			return funcClient{lock: func(ctx context.Context, name string) (Held, error) {
				return Held{Release: noRelease}, each(ctx, cs, func(ctx context.Context, c *goredis.Client) error { return c.Ping(ctx).Err() })
			}, close: closeAll(cs)}, nil
		}},
		{Name: "floor", Role: RoleFloor, MinRT: 2 * n, New: func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
			cs := connect(rt)
			if err := each(ctx, cs, func(ctx context.Context, c *goredis.Client) error { return deleteIfOwner.Load(ctx, c).Err() }); err != nil {
				closeAll(cs)()
				return nil, err
			}
			return funcClient{lock: func(ctx context.Context, name string) (Held, error) {
				k, v := prefix+name, newValue()
				var mu sync.Mutex
				got := 0
				err := each(ctx, cs, func(ctx context.Context, c *goredis.Client) error {
					ok, err := c.SetNX(ctx, k, v, floorTTL).Result()
					if ok {
						mu.Lock()
						got++
						mu.Unlock()
					}
					return err
				})
				release := func(ctx context.Context) error {
					return each(ctx, cs, func(ctx context.Context, c *goredis.Client) error {
						return deleteIfOwner.EvalSha(ctx, c, []string{k}, v).Err()
					})
				}
				if err != nil || got <= n/2 {
					release(ctx)
					return Held{}, errors.Join(err, errBusy(name))
				}
				return Held{Release: release}, nil
			}, close: closeAll(cs)}, nil
		}},
		// The fenced floor on each master; its token is the highest of
		// the quorum's, as padlock's is (not monotonic over masters).
		{Name: "floor-fenced", Role: RoleFencedFloor, MinRT: 2 * n, New: func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
			cs := connect(rt)
			if err := each(ctx, cs, func(ctx context.Context, c *goredis.Client) error {
				return errors.Join(fencedAcquire.Load(ctx, c).Err(), deleteIfOwner.Load(ctx, c).Err())
			}); err != nil {
				closeAll(cs)()
				return nil, err
			}
			return funcClient{lock: func(ctx context.Context, name string) (Held, error) {
				keys, v := fencedKeys(prefix, name), newValue()
				var (
					mu    sync.Mutex
					got   int
					token int64
				)
				err := each(ctx, cs, func(ctx context.Context, c *goredis.Client) error {
					t, err := fencedAcquire.EvalSha(ctx, c, keys, v, floorTTL.Milliseconds()).Int64()
					if t > 0 {
						mu.Lock()
						got, token = got+1, max(token, t)
						mu.Unlock()
					}
					return err
				})
				release := func(ctx context.Context) error {
					return each(ctx, cs, func(ctx context.Context, c *goredis.Client) error {
						return deleteIfOwner.EvalSha(ctx, c, keys[:1], v).Err()
					})
				}
				if err != nil || got <= n/2 {
					release(ctx)
					return Held{}, errors.Join(err, errBusy(name))
				}
				return Held{Token: uint64(token), Release: release}, nil
			}, close: closeAll(cs)}, nil
		}},
		// RedLock's tokens are not monotonic (Capabilities say so): the
		// highest of per-master counters, which fall behind unevenly.
		{Name: "padlock", Role: RolePadlock, MinRT: 2 * n, Waits: true, Recipes: allRecipes, New: func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
			v := *u
			q := v.Query()
			q.Set("prefix", prefix)
			v.RawQuery = q.Encode()
			l, err := padlock.Open(ctx, v.String(), padlock.WithDialer(rt.Dial))
			if err != nil {
				return nil, err
			}
			return padlockClient(l, nil), nil
		}},
		redsyncImpl("redsync"),
		redsyncImpl("redsync-10ms", redsync.WithRetryDelay(10*time.Millisecond), redsync.WithTries(math.MaxInt32)),
	}
	g.Impls = withBefore(g.Impls, func(im Impl) (func(ctx context.Context, rt *Counter, prefix string) (Client, error), bool) {
		return func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
			v := *u
			q := v.Query()
			q.Set("prefix", prefix)
			v.RawQuery = q.Encode()
			return beforeOpen(ctx, v.String(), rt.Dial, "")
		}, beforeOpen != nil
	})
	g.Leftover = func(ctx context.Context, prefix string) (int, error) {
		total := 0
		for _, c := range admin {
			k, err := deletePrefix(ctx, c, prefix)
			if err != nil {
				return total, err
			}
			total += k
		}
		return total, nil
	}
	return g, nil
}

// redsyncClient is a Client of redsync: a Mutex per acquisition, with
// opts (none: redsync's defaults).
func redsyncClient(rs *redsync.Redsync, prefix string, closeConn func() error, opts ...redsync.Option) Client {
	return funcClient{lock: func(ctx context.Context, name string) (Held, error) {
		m := rs.NewMutex(prefix+name, opts...)
		if err := m.LockContext(ctx); err != nil {
			return Held{}, err
		}
		return Held{Release: func(ctx context.Context) error {
			_, err := m.UnlockContext(ctx)
			return err
		}}, nil
	}, close: closeConn}
}

// each runs f on every client at once and joins their errors.
func each(ctx context.Context, cs []*goredis.Client, f func(ctx context.Context, c *goredis.Client) error) error {
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { errs[i] = f(ctx, c) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// deletePrefix deletes every key of c under prefix and counts those left
// behind: all but padlock's fencing counters, which it keeps on purpose
// (a name's tokens must keep rising after its lock is gone).
func deletePrefix(ctx context.Context, c *goredis.Client, prefix string) (int, error) {
	n := 0
	iter := c.Scan(ctx, 0, escapeGlob(prefix)+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if err := c.Del(ctx, iter.Val()).Err(); err != nil {
			return n, err
		}
		if !strings.HasSuffix(iter.Val(), ":fence") {
			n++
		}
	}
	return n, iter.Err()
}

// escapeGlob escapes the glob characters of s for SCAN MATCH.
func escapeGlob(s string) string {
	out := make([]byte, 0, len(s))
	for i := range len(s) {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// quietRedis silences go-redis's process-wide logger, which writes to
// stderr (a Sentinel client reports every primary it resolves): the
// benchmark's output is its table.
func quietRedis() { quietOnce.Do(func() { goredis.SetLogger(discardRedis{}) }) }

var quietOnce sync.Once

type discardRedis struct{}

func (discardRedis) Printf(context.Context, string, ...any) {}

var values struct {
	sync.Mutex
	n uint64
}

// newValue is a unique lock value for the floors.
func newValue() string {
	values.Lock()
	defer values.Unlock()
	values.n++
	return strconv.FormatUint(values.n, 36) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}
