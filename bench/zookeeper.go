package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/driverkit"
)

// zkSession is the session timeout of the bench's own ZooKeeper clients.
const zkSession = 10 * time.Second

// zookeeperGroup benchmarks ZooKeeper: padlock's zk:// and go-zookeeper's
// zk.Lock, each client a session of its own whose request turns are
// counted on its connection.
func zookeeperGroup(ctx context.Context, u *url.URL) (*Group, error) {
	servers, err := driverkit.Hosts(u, "2181")
	if err != nil {
		return nil, err
	}
	root := strings.TrimRight(u.Path, "/")
	if root == "" {
		root = "/padlock"
	}
	connect := func(ctx context.Context, rt *Counter, session time.Duration) (*zk.Conn, error) {
		dial := func(network, addr string, timeout time.Duration) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			if rt == nil {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}
			return rt.Dial(ctx, network, addr)
		}
		c, _, err := zk.Connect(servers, session, zk.WithDialer(dial), zk.WithLogger(quietZK{}))
		if err != nil {
			return nil, err
		}
		// Wait for the session: go-zookeeper connects in the background.
		for c.State() != zk.StateHasSession {
			select {
			case <-ctx.Done():
				c.Close()
				return nil, fmt.Errorf("bench: no ZooKeeper session with %s: %w", strings.Join(servers, ","), ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
		return c, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*second)
	defer cancel()
	admin, err := connect(cctx, nil, zkSession)
	if err != nil {
		return nil, err
	}
	withSession := func(session time.Duration, f func(ctx context.Context, c *zk.Conn, prefix string) (Client, error)) func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
		return func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
			cctx, cancel := context.WithTimeout(ctx, 10*second)
			defer cancel()
			c, err := connect(cctx, rt, session)
			if err != nil {
				return nil, err
			}
			cl, err := f(ctx, c, prefix)
			if err != nil {
				c.Close()
				return nil, err
			}
			return cl, nil
		}
	}
	with := func(f func(ctx context.Context, c *zk.Conn, prefix string) (Client, error)) func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
		return withSession(zkSession, f)
	}
	closeConn := func(c *zk.Conn) func() error { return func() error { c.Close(); return nil } }
	acl := zk.WorldACL(zk.PermAll)
	g := &Group{Backend: "zookeeper", URL: redacted(u), Servers: servers, Close: closeConn(admin)}
	g.Impls = []Impl{
		{Name: "rtt", Role: RoleRTT, MinRT: 1, New: with(func(ctx context.Context, c *zk.Conn, prefix string) (Client, error) {
			return funcClient{lock: func(ctx context.Context, name string) (Held, error) {
				_, _, err := c.Exists("/")
				return Held{Release: noRelease}, err
			}, close: closeConn(c)}, nil
		})},
		// A fenced floor as it is: its node's sequence number is its
		// token, and its release deletes only its own node.
		{Name: "floor", Role: RoleFloor, MinRT: 3, Tokens: true, Fenced: true, New: with(func(ctx context.Context, c *zk.Conn, prefix string) (Client, error) {
			return funcClient{lock: func(ctx context.Context, name string) (Held, error) {
				dir := path.Join(root, prefix, name)
				p, err := c.Create(dir+"/lock-", nil, zk.FlagEphemeral|zk.FlagSequence, acl)
				if errors.Is(err, zk.ErrNoNode) {
					// The name's first acquisition makes its parents.
					if err = createAll(c, dir, acl); err == nil {
						p, err = c.Create(dir+"/lock-", nil, zk.FlagEphemeral|zk.FlagSequence, acl)
					}
				}
				if err != nil {
					return Held{}, err
				}
				kids, _, err := c.Children(dir)
				if err == nil && (len(kids) != 1 || kids[0] != path.Base(p)) {
					err = errBusy(name)
				}
				if err != nil {
					c.Delete(p, -1)
					return Held{}, err
				}
				seq, _ := sequence(p) // rises with the parent's every change
				return Held{Token: seq, Release: func(context.Context) error { return c.Delete(p, -1) }}, nil
			}, close: closeConn(c)}, nil
		})},
		{Name: "padlock", Role: RolePadlock, MinRT: 3, Waits: true, Tokens: true, Recipes: allRecipes, New: func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
			v := *u
			v.Path = path.Join(root, prefix)
			l, err := padlock.Open(ctx, v.String(), padlock.WithDialer(rt.Dial))
			if err != nil {
				return nil, err
			}
			return padlockClient(l, nil), nil
		}},
		{Name: "zk.Lock", Role: RolePeer, MinRT: 3, Waits: true, New: with(func(ctx context.Context, c *zk.Conn, prefix string) (Client, error) {
			return funcClient{lock: func(ctx context.Context, name string) (Held, error) {
				// zk.Lock takes no context: it waits until it holds the lock.
				l := zk.NewLock(c, path.Join(root, prefix, name), acl)
				if err := l.Lock(); err != nil {
					return Held{}, err
				}
				return Held{Release: func(context.Context) error { return l.Unlock() }}, nil
			}, close: closeConn(c)}, nil
		})},
	}
	g.Impls = withBefore(g.Impls, func(im Impl) (func(ctx context.Context, rt *Counter, prefix string) (Client, error), bool) {
		return func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
			v := *u
			v.Path = path.Join(root, prefix)
			return beforeOpen(ctx, v.String(), rt.Dial, "")
		}, beforeOpen != nil
	})
	// go-zookeeper has no election recipe: its zk.Lock is the election
	// (the holder leads), on a session of ElectTTL. It has no values to
	// proclaim or observe.
	g.Impls = append(g.Impls, Impl{Name: "zk.Lock-election", Role: RolePeer, MinRT: 3, Waits: true, Recipes: []string{E1}, OnlyRecipes: true,
		New: withSession(ElectTTL, func(ctx context.Context, c *zk.Conn, prefix string) (Client, error) {
			return &zkElectionClient{c: c, dir: path.Join(root, prefix), acl: acl}, nil
		})})
	g.Leftover = func(ctx context.Context, prefix string) (int, error) {
		// A closed client's session ends when the server has closed it
		// (go-zookeeper waits for that at most a second): its ephemeral
		// nodes are left behind only if they outlive the session timeout.
		p := path.Join(root, prefix)
		deadline := time.Now().Add(zkSession + 5*second)
		for {
			n, err := bounded(ctx, func() (int, error) { return countEphemeral(admin, p) })
			if err != nil || n == 0 || time.Now().After(deadline) {
				if _, derr := bounded(ctx, func() (int, error) { return deleteTree(admin, p) }); err == nil {
					err = derr
				}
				return n, err
			}
			select {
			case <-ctx.Done():
				return n, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return g, nil
}

// createAll makes dir and its missing parents, as persistent nodes.
func createAll(c *zk.Conn, dir string, acl []zk.ACL) error {
	p := ""
	for _, part := range strings.Split(strings.Trim(dir, "/"), "/") {
		p += "/" + part
		if _, err := c.Create(p, nil, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// deleteTree deletes p and everything under it, and counts the ephemeral
// nodes it found: locks and queue entries left behind (the name's
// persistent parents are not: a recipe may keep them).
func deleteTree(c *zk.Conn, p string) (int, error) { return walkTree(c, p, true) }

// bounded runs f, which calls go-zookeeper (whose requests take no
// context), until ctx ends: then it returns ctx's error, and f ends when
// its request fails or the group's connection closes.
func bounded(ctx context.Context, f func() (int, error)) (int, error) {
	type result struct {
		n   int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		n, err := f()
		ch <- result{n, err}
	}()
	select {
	case r := <-ch:
		return r.n, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// countEphemeral counts the ephemeral nodes under p.
func countEphemeral(c *zk.Conn, p string) (int, error) { return walkTree(c, p, false) }

// walkTree counts the ephemeral nodes of the tree at p, deleting the tree
// (children first) if del.
func walkTree(c *zk.Conn, p string, del bool) (int, error) {
	kids, st, err := c.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	if st.EphemeralOwner != 0 {
		n++
	}
	for _, k := range kids {
		m, err := walkTree(c, path.Join(p, k), del)
		n += m
		if err != nil {
			return n, err
		}
	}
	if del {
		if err := c.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return n, err
		}
	}
	return n, nil
}

// sequence parses the sequence number ZooKeeper appended to p.
func sequence(p string) (uint64, bool) {
	if len(p) < 10 {
		return 0, false
	}
	var n uint64
	for _, ch := range p[len(p)-10:] {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		n = n*10 + uint64(ch-'0')
	}
	return n, true
}

// quietZK discards go-zookeeper's log lines.
type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// zkElectionClient is go-zookeeper's zk.Lock as an election.
type zkElectionClient struct {
	c   *zk.Conn
	dir string
	acl []zk.ACL
}

func (z *zkElectionClient) Campaign(ctx context.Context, name, value string) (Term, error) {
	// zk.Lock takes no context: it waits until it holds the lock, or the
	// connection closes.
	l := zk.NewLock(z.c, path.Join(z.dir, name), z.acl)
	if err := l.Lock(); err != nil {
		return Term{}, err
	}
	return Term{Held: Held{Release: func(context.Context) error { return l.Unlock() }}}, nil
}

func (z *zkElectionClient) Observe(context.Context, string) (<-chan Observed, error) {
	return nil, fmt.Errorf("%w: go-zookeeper has no election to observe", errNA)
}

func (z *zkElectionClient) Lock(ctx context.Context, name string) (Held, error) {
	t, err := z.Campaign(ctx, name, "")
	return t.Held, err
}

func (z *zkElectionClient) Close() error {
	z.c.Close()
	return nil
}
