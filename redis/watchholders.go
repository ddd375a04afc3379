package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// errNoKeyspaceEvents says that the server does not send the keyspace
// notifications WatchHolders follows.
var errNoKeyspaceEvents = errors.New("the server sends no keyspace notifications for padlock's keys " +
	"(notify-keyspace-events needs K and the classes g, $, z and x, or K and A; e.g. CONFIG SET notify-keyspace-events KA)")

// WatchHolders follows the server's keyspace notifications for the keys
// of the names under prefix: a hold's key set, deleted, renewed or
// expired, a reader's or permit's set or a waiters' line changed. Redis
// sends them only where its operator turned them on (notify-keyspace-events,
// off by default): without K and the classes of padlock's keys (g, $, z, x;
// A has them all) WatchHolders says backends.ErrUnsupported, and an
// inspector polls. On a Cluster each master sends its own keys' events,
// and it subscribes on each master the cluster has when it starts (a
// master added later is not followed; its names are still read at the
// inspector's interval). Renewals signal too: spurious, as allowed. After
// a broken connection go-redis subscribes again, and that
// acknowledgement signals, as the first one does.
func (d *driver) WatchHolders(ctx context.Context, prefix string) (<-chan struct{}, error) {
	nodes, err := d.masters(ctx)
	if err != nil {
		return nil, err
	}
	return watchKeyspace(ctx, nodes, keyspacePattern(d.prefix, prefix), d.wake.done)
}

// WatchHolders follows every master's keyspace notifications for the keys
// of the names under prefix, as one server's are followed
// (driver.WatchHolders): every master must send them
// (notify-keyspace-events KA) and answer when the watch starts, or it says
// why (backends.ErrUnsupported where one does not send them) and an
// inspector polls. Each change of a hold writes to a quorum of the masters,
// so any one of them signals it; a master that goes away is subscribed
// again when it is back, and that signals.
func (r *redlock) WatchHolders(ctx context.Context, prefix string) (<-chan struct{}, error) {
	nodes := make([]goredis.UniversalClient, len(r.masters))
	for i, m := range r.masters {
		nodes[i] = m
	}
	return watchKeyspace(ctx, nodes, keyspacePattern(r.prefix, prefix), r.closed)
}

// watchKeyspace subscribes to the keyspace notifications of the keys that
// match pattern on every one of nodes, after checking that each sends
// them, and signals on the returned channel (buffered, 1) whenever one
// comes or a subscription is made (again), until ctx ends or closed
// closes; it then closes the channel. Its first signal says that every
// node's subscription is up.
func watchKeyspace(ctx context.Context, nodes []goredis.UniversalClient, pattern string, closed <-chan struct{}) (<-chan struct{}, error) {
	for _, n := range nodes {
		if err := keyspaceEventsOn(ctx, n); err != nil {
			return nil, err
		}
	}
	out := make(chan struct{}, 1)
	signal := func() {
		select {
		case out <- struct{}{}:
		default: // one is pending already
		}
	}
	var subs []*goredis.PubSub
	closeAll := func() {
		for _, ps := range subs {
			ps.Close()
		}
	}
	for _, n := range nodes {
		db := 0
		if c, ok := n.(*goredis.Client); ok {
			db = c.Options().DB
		}
		ps := n.PSubscribe(ctx, "__keyspace@"+strconv.Itoa(db)+"__:"+pattern)
		subs = append(subs, ps)
		// The first acknowledgement: the watch is up on this node.
		rctx, cancel := driverkit.WithRequestTimeout(ctx, 0)
		_, err := ps.Receive(rctx)
		cancel()
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("redis keyspace subscription: %w", err)
		}
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, ps := range subs {
		in := ps.ChannelWithSubscriptions()
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case _, ok := <-in:
					if !ok {
						return
					}
					signal() // an event, or a subscription made again
				}
			}
		})
	}
	signal() // every node's watch is up
	go func() {
		select {
		case <-ctx.Done():
		case <-closed:
		}
		closeAll()
		close(stop)
		wg.Wait()
		close(out)
	}()
	return out, nil
}

// masters returns the clients of the servers that hold the keys: the one
// server, or a Cluster's masters.
func (d *driver) masters(ctx context.Context) ([]goredis.UniversalClient, error) {
	cc, ok := d.c.(*goredis.ClusterClient)
	if !ok {
		return []goredis.UniversalClient{d.c}, nil
	}
	var (
		mu    sync.Mutex
		nodes []goredis.UniversalClient
	)
	rctx, cancel := driverkit.WithRequestTimeout(ctx, 0)
	defer cancel()
	err := cc.ForEachMaster(rctx, func(ctx context.Context, c *goredis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		nodes = append(nodes, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redis cluster masters: %w", err)
	}
	return nodes, nil
}

// keyspaceEventsOn checks that c's server sends the keyspace notifications
// of padlock's keys; backends.ErrUnsupported if it does not, or if it
// answers CONFIG GET with an error (CONFIG renamed away, as on some hosted
// servers); an error matching backends.ErrUnavailable if it does not
// answer.
func keyspaceEventsOn(ctx context.Context, c goredis.UniversalClient) error {
	rctx, cancel := driverkit.WithRequestTimeout(ctx, 0)
	defer cancel()
	cfg, err := c.ConfigGet(rctx, "notify-keyspace-events").Result()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var reply goredis.Error
		if !errors.As(err, &reply) {
			return driverkit.Unavailable("redis keyspace notifications", err) // no answer: the server may be down
		}
		return fmt.Errorf("%w: CONFIG GET notify-keyspace-events: %v", backends.ErrUnsupported, err)
	}
	flags := cfg["notify-keyspace-events"]
	if !strings.Contains(flags, "K") || !strings.Contains(flags, "A") && !containsAll(flags, "g$zx") {
		return fmt.Errorf("%w: %w (it is %q)", backends.ErrUnsupported, errNoKeyspaceEvents, flags)
	}
	return nil
}

func containsAll(s, chars string) bool {
	for _, c := range chars {
		if !strings.ContainsRune(s, c) {
			return false
		}
	}
	return true
}

// keyspacePattern is the glob of the keys of the names that begin with
// prefix, under keyPrefix: names are escaped character by character
// (keysFor), so the escaped prefix begins exactly their keys; the glob's
// own special characters in it are escaped.
func keyspacePattern(keyPrefix, prefix string) string {
	var b strings.Builder
	for _, r := range keyPrefix + ":{" + driverkit.EscapeName(prefix, "{}") {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('*')
	return b.String()
}
