package redis

import (
	"context"
	"errors"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// wakers gives each wake-up channel its waker. On one server (a single
// Redis, a Sentinel's primary) there is one. On a Redis Cluster there is
// one per master, and a channel is subscribed on the master that owns its
// slot, where the scripts that publish on it run: a message published on
// one node reaches subscribers on the others over the cluster bus, whose
// delivery had a tail of about 40 ms on loopback (p99 of 35 ms for two
// nodes out of three, against 0.4 ms on the slot's own node), long enough
// to stall every hand-off behind it. Classic pub/sub still reaches every
// node, so a channel whose slot moved since it was subscribed is only
// slower, never deaf.
type wakers struct {
	cluster *goredis.ClusterClient // nil on one server
	one     *waker                 // one server's
	done    chan struct{}          // closed by close

	mu     sync.Mutex
	byNode map[string]*waker // a cluster's, by master address ("" when none was found)
	closed bool
}

func newWakers(c goredis.UniversalClient) *wakers {
	ws := &wakers{done: make(chan struct{})}
	if cc, ok := c.(*goredis.ClusterClient); ok {
		ws.cluster, ws.byNode = cc, map[string]*waker{}
	} else {
		ws.one = newWaker(c)
	}
	return ws
}

// pick returns channel's waker.
func (ws *wakers) pick(ctx context.Context, channel string) (*waker, error) {
	if ws.cluster == nil {
		return ws.one, nil
	}
	addr := ""
	// The channel's hash tag is its name's: its slot is the name's keys'.
	// Finding its master may load the cluster's slots: bounded as every
	// request is, whatever ctx says (a waiting Lock's may have no end).
	rctx, cancel := driverkit.WithRequestTimeout(ctx, 0)
	node, err := ws.cluster.MasterForKey(rctx, channel)
	cancel()
	if err == nil {
		addr = node.Options().Addr
	} else {
		node = nil
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.closed {
		return nil, backends.ErrClosed
	}
	w := ws.byNode[addr]
	if w == nil {
		// The waker's pub/sub connection is the master's own (its node
		// client's), made again to the same address after a break. It
		// was the cluster client's once, whose connection goes to the
		// master of the first channel subscribed, unless go-redis's
		// receiving goroutine, which the waker starts first, connects
		// before that: then to a random node (no channel to route by).
		// It did, in about one benchmark turn in three, and that turn's
		// messages came over the cluster bus, 40ms late at times.
		if node != nil {
			w = newWaker(node)
		} else {
			w = newWaker(ws.cluster) // no master found: any node hears classic PUBLISH
		}
		ws.byNode[addr] = w
	}
	return w, nil
}

// subscribe is waker.subscribe on channel's waker.
func (ws *wakers) subscribe(ctx context.Context, channel string, c chan string) (*wakeSub, error) {
	s, _, err := ws.subscribeAs(ctx, channel, c, "", time.Time{})
	return s, err
}

// subscribeAs is waker.subscribeAs on channel's waker.
func (ws *wakers) subscribeAs(ctx context.Context, channel string, c chan string, id string, since time.Time) (*wakeSub, bool, error) {
	w, err := ws.pick(ctx, channel)
	if err != nil {
		return nil, false, err
	}
	return w.subscribeAs(ctx, channel, c, id, since)
}

// unsubscribe removes s from its waker.
func (ws *wakers) unsubscribe(s *wakeSub) { s.w.unsubscribe(s) }

func (ws *wakers) close() error {
	close(ws.done)
	if ws.one != nil {
		return ws.one.close()
	}
	ws.mu.Lock()
	ws.closed = true
	all := ws.byNode
	ws.mu.Unlock()
	var errs []error
	for _, w := range all {
		errs = append(errs, w.close())
	}
	return errors.Join(errs...)
}
