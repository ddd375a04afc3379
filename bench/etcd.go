package bench

import (
	"context"
	"fmt"
	"net/url"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	recipes "go.etcd.io/etcd/client/v3/experimental/recipes"
	"go.uber.org/zap"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/driverkit"
	"github.com/padlock-go/padlock/etcd"
)

// etcdGroup benchmarks etcd: every client is an etcd client of its own,
// whose unary calls and stream messages are counted.
func etcdGroup(ctx context.Context, u *url.URL) (*Group, error) {
	endpoints, err := driverkit.Hosts(u, "2379")
	if err != nil {
		return nil, err
	}
	user, pass := driverkit.Credentials(u)
	connect := func(rt *Counter) (*clientv3.Client, error) {
		cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * second, Username: user, Password: pass, Logger: zap.NewNop()}
		if rt != nil {
			cfg.DialOptions = rt.GRPC()
		}
		return clientv3.New(cfg)
	}
	admin, err := connect(nil)
	if err != nil {
		return nil, fmt.Errorf("bench: etcd %s: %w", u.Host, err)
	}
	if _, err := admin.Get(ctx, "padlock-bench-probe", clientv3.WithCountOnly()); err != nil {
		admin.Close()
		return nil, fmt.Errorf("bench: etcd %s: %w", u.Host, err)
	}
	// with wraps a client constructor: the client is closed with Close.
	with := func(f func(ctx context.Context, cli *clientv3.Client, prefix string) (Client, error)) func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
		return func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
			cli, err := connect(rt)
			if err != nil {
				return nil, err
			}
			c, err := f(ctx, cli, prefix)
			if err != nil {
				cli.Close()
				return nil, err
			}
			return c, nil
		}
	}
	g := &Group{Backend: "etcd", URL: redacted(u), Servers: endpoints, Close: admin.Close}
	g.Impls = []Impl{
		{Name: "rtt", Role: RoleRTT, MinRT: 1, New: with(func(ctx context.Context, cli *clientv3.Client, prefix string) (Client, error) {
			return funcClient{lock: func(ctx context.Context, name string) (Held, error) {
				_, err := cli.Get(ctx, prefix+name, clientv3.WithSerializable())
				return Held{Release: noRelease}, err
			}, close: cli.Close}, nil
		})},
		{Name: "floor", Role: RoleFloor, MinRT: 2, Tokens: true, New: with(etcdFloor(false))},
		// The floor whose release deletes only its own key (a guarded
		// Txn, as padlock's): the floor's plain Delete would delete a
		// later holder's key after its own lease ran out.
		{Name: "floor-fenced", Role: RoleFencedFloor, MinRT: 2, Tokens: true, New: with(etcdFloor(true))},
		{Name: "padlock", Role: RolePadlock, MinRT: 2, Waits: true, Tokens: true, Recipes: allRecipes, New: with(func(ctx context.Context, cli *clientv3.Client, prefix string) (Client, error) {
			l, err := etcd.New(ctx, cli, prefix)
			if err != nil {
				return nil, err
			}
			return padlockClient(l, cli.Close), nil
		})},
		{Name: "concurrency.Mutex", Role: RolePeer, MinRT: 2, Waits: true, New: with(func(ctx context.Context, cli *clientv3.Client, prefix string) (Client, error) {
			// One session per client, reused by every acquisition.
			// Its lease is padlock's default TTL: the keepalives cost the
			// same.
			s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(padlock.DefaultTTL/time.Second)))
			if err != nil {
				return nil, err
			}
			return funcClient{lock: func(ctx context.Context, name string) (Held, error) {
				m := concurrency.NewMutex(s, prefix+name)
				if err := m.Lock(ctx); err != nil {
					return Held{}, err
				}
				return Held{Release: m.Unlock}, nil
			}, close: func() error {
				s.Close()
				return cli.Close()
			}}, nil
		})},
	}
	g.Impls = withBefore(g.Impls, func(im Impl) (func(ctx context.Context, rt *Counter, prefix string) (Client, error), bool) {
		return with(func(ctx context.Context, cli *clientv3.Client, prefix string) (Client, error) {
			return beforeEtcd(ctx, cli, prefix)
		}), beforeEtcd != nil
	})
	g.Impls = append(g.Impls,
		Impl{Name: "recipes.RWMutex", Role: RolePeer, MinRT: 2, Waits: true, Recipes: []string{R1}, OnlyRecipes: true, New: with(func(ctx context.Context, cli *clientv3.Client, prefix string) (Client, error) {
			s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(padlock.DefaultTTL/time.Second)))
			if err != nil {
				return nil, err
			}
			return &rwMutexClient{s: s, cli: cli, prefix: prefix}, nil
		})},
		Impl{Name: "concurrency.Election", Role: RolePeer, MinRT: 2, Waits: true, Recipes: []string{E1}, OnlyRecipes: true, New: with(func(ctx context.Context, cli *clientv3.Client, prefix string) (Client, error) {
			s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(ElectTTL/time.Second)))
			if err != nil {
				return nil, err
			}
			return &electionClient{s: s, cli: cli, prefix: prefix}, nil
		})},
	)
	g.Leftover = func(ctx context.Context, prefix string) (int, error) {
		r, err := admin.Delete(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			return 0, err
		}
		return int(r.Deleted), nil
	}
	return g, nil
}

// redacted is u without its password.
func redacted(u *url.URL) string { return u.Redacted() }

// rwMutexClient is a client of etcd's experimental recipe.RWMutex: a
// writer's Lock, a reader's RLock, on one session. The recipe takes no
// context: a waiter waits until it holds the lock or its client closes.
type rwMutexClient struct {
	s      *concurrency.Session
	cli    *clientv3.Client
	prefix string
}

func (c *rwMutexClient) Lock(ctx context.Context, name string) (Held, error) {
	m := recipes.NewRWMutex(c.s, c.prefix+name)
	if err := m.Lock(); err != nil {
		return Held{}, err
	}
	return Held{Release: func(context.Context) error { return m.Unlock() }}, nil
}

func (c *rwMutexClient) RLock(ctx context.Context, name string) (Held, error) {
	m := recipes.NewRWMutex(c.s, c.prefix+name)
	if err := m.RLock(); err != nil {
		return Held{}, err
	}
	return Held{Release: func(context.Context) error { return m.RUnlock() }}, nil
}

func (c *rwMutexClient) Close() error {
	c.s.Close()
	return c.cli.Close()
}

// electionClient is a client of etcd's concurrency.Election, on one
// session of ElectTTL: its Lock is a campaign and a resignation.
type electionClient struct {
	s      *concurrency.Session
	cli    *clientv3.Client
	prefix string
}

func (c *electionClient) Campaign(ctx context.Context, name, value string) (Term, error) {
	e := concurrency.NewElection(c.s, c.prefix+name)
	if err := e.Campaign(ctx, value); err != nil {
		return Term{}, err
	}
	// The leader key's create revision: a rising term number.
	return Term{Held: Held{Token: uint64(e.Rev()), Release: e.Resign}, Proclaim: e.Proclaim}, nil
}

func (c *electionClient) Observe(ctx context.Context, name string) (<-chan Observed, error) {
	e := concurrency.NewElection(c.s, c.prefix+name)
	return observed(ctx, e.Observe(ctx), func(r *clientv3.GetResponse) string { return string(r.Kvs[0].Value) }), nil
}

func (c *electionClient) Lock(ctx context.Context, name string) (Held, error) {
	t, err := c.Campaign(ctx, name, "")
	return t.Held, err
}

func (c *electionClient) Close() error {
	c.s.Close()
	return c.cli.Close()
}

// etcdFloor is the wire floor of etcd: a Txn that puts the key if it has
// never been made, under a lease of the client's own, its revision the
// token; the release deletes it, or, guarded, deletes it only if it is
// still the key this grant put.
func etcdFloor(guarded bool) func(ctx context.Context, cli *clientv3.Client, prefix string) (Client, error) {
	return func(ctx context.Context, cli *clientv3.Client, prefix string) (Client, error) {
		// A lease of its own, as every lock's key has one; granted
		// once, as a reused session's is.
		lease, err := cli.Grant(ctx, 3600)
		if err != nil {
			return nil, err
		}
		return funcClient{lock: func(ctx context.Context, name string) (Held, error) {
			k := prefix + name
			r, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
				Then(clientv3.OpPut(k, "", clientv3.WithLease(lease.ID))).Commit()
			switch {
			case err != nil:
				return Held{}, err
			case !r.Succeeded:
				return Held{}, errBusy(name)
			}
			rev := r.Header.Revision
			return Held{Token: uint64(rev), Release: func(ctx context.Context) error {
				if guarded {
					_, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", rev)).Then(clientv3.OpDelete(k)).Commit()
					return err
				}
				_, err := cli.Delete(ctx, k)
				return err
			}}, nil
		}, close: func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*second)
			defer cancel()
			cli.Revoke(ctx, lease.ID)
			return cli.Close()
		}}, nil
	}
}
