package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/padlock-go/padlock/backends"
)

// WatchHolders follows the holds of the names under prefix with
// ZooKeeper's one-shot watches, the way Curator's TreeCache follows a
// tree: a children watch on the root (a name's container made or
// removed) and one on each name's container that may hold a name under
// prefix (a grant, a release, an expiry, an acquisition joining or
// leaving the line each add or remove a child). go-zookeeper has no
// persistent recursive watch (ZooKeeper 3.6's addWatch), so each watch is
// set again when it fires, before the signal: a change between the fire
// and the new watch is in what the inspector then reads. A container
// whose segment is a hash (a long name) may hold any name and is watched
// whatever the prefix; its changes may be spurious signals. Two changes
// leave the children as they are and are not signalled: a Proclaim (a
// candidacy's data) and a writer turning reader in place (Share), which
// lets the readers behind it in; an inspector sees them at its next read.
func (d *driver) WatchHolders(ctx context.Context, prefix string) (<-chan struct{}, error) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, fmt.Errorf("zookeeper: %w", backends.ErrClosed)
	}
	d.bg.Add(1)
	d.mu.Unlock()
	wctx, cancel := context.WithCancel(ctx)
	stopOnClose := context.AfterFunc(d.ctx, cancel)
	t := &treeWatch{d: d, prefix: prefix, fired: make(chan fired), armed: map[string]bool{}}
	out := make(chan struct{}, 1)
	go func() {
		defer d.bg.Done()
		defer close(out)
		defer stopOnClose()
		defer cancel()
		t.run(wctx, out)
		t.forwarders.Wait()
	}()
	return out, nil
}

// treeWatch is one WatchHolders' state, owned by its run goroutine.
type treeWatch struct {
	d      *driver
	prefix string
	s      *session
	gen    int             // bumped when every watch is set anew: older ones' events are stale
	armed  map[string]bool // the containers (by segment) with a watch set; the root's is ""
	fired  chan fired      // from the forwarders

	forwarders sync.WaitGroup
}

// fired is a watch's event, with the container it was set on and the
// generation it was set in.
type fired struct {
	seg string
	gen int
	ev  zk.Event
}

// run sets every watch, signals, and then sets each watch again as it
// fires and signals, until ctx ends. While the watches cannot be set (no
// server), it tries again with backoff; the inspector polls meanwhile.
func (t *treeWatch) run(ctx context.Context, out chan<- struct{}) {
	fresh := true
	for {
		if fresh {
			for attempt := 0; ; attempt++ {
				err := t.armAll(ctx)
				if err == nil {
					break
				}
				if !pause(ctx, attempt) {
					return
				}
			}
			fresh = false
			signal(out) // up, or up again: changes may have gone unseen
		}
		var expired <-chan struct{}
		if t.s != nil {
			expired = t.s.expired
		}
		select {
		case <-ctx.Done():
			return
		case <-expired:
			fresh = true
		case f := <-t.fired:
			if f.gen != t.gen {
				continue // set on an older session
			}
			delete(t.armed, f.seg)
			if f.ev.Type == zk.EventNotWatching {
				fresh = true // the connection dropped its watches
				continue
			}
			if err := t.arm(ctx, f.seg); err != nil {
				fresh = true
				continue
			}
			signal(out)
		}
	}
}

// armAll sets every watch on a live session, as a new generation.
func (t *treeWatch) armAll(ctx context.Context) error {
	if t.s == nil || !t.s.alive() {
		s, err := t.d.anySession(ctx)
		if err != nil {
			return err
		}
		t.s = s
	}
	t.gen++
	clear(t.armed)
	return t.arm(ctx, "")
}

// arm sets the watch on the container seg ("" the root, whose children
// are the containers: each new one that may hold a name under the
// prefix gets its watch).
func (t *treeWatch) arm(ctx context.Context, seg string) error {
	s := t.s
	if seg != "" {
		path := t.d.root + "/" + seg
		ch, err := call(ctx, s, "watch holders", func() (<-chan zk.Event, error) {
			_, _, ch, err := s.conn.ChildrenW(path)
			return ch, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			return nil // removed: the root's watch fires for it, and for its return
		}
		if err != nil {
			return err
		}
		t.forward(ctx, seg, ch)
		return nil
	}
	type listed struct {
		kids []string
		ch   <-chan zk.Event
	}
	l, err := call(ctx, s, "watch holders", func() (listed, error) {
		kids, _, ch, err := s.conn.ChildrenW(t.d.root)
		return listed{kids, ch}, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		// No lock taken yet under this root: wait for the root itself.
		l.ch, err = call(ctx, s, "watch holders", func() (<-chan zk.Event, error) {
			exists, _, ch, err := s.conn.ExistsW(t.d.root)
			if exists {
				return ch, errRootMade
			}
			return ch, err
		})
	}
	if err != nil {
		return err
	}
	t.forward(ctx, "", l.ch)
	for _, kid := range l.kids {
		if t.armed[kid] || kid == forcedChild || !mayHold(kid, t.prefix) {
			continue
		}
		if err := t.arm(ctx, kid); err != nil {
			return err
		}
	}
	return nil
}

// errRootMade is the root made between its listing and its exists watch:
// the watches are set again.
var errRootMade = errors.New("zookeeper: the lock root was made meanwhile")

// forward hands ch's one event to run, tagged; until ctx ends.
func (t *treeWatch) forward(ctx context.Context, seg string, ch <-chan zk.Event) {
	t.armed[seg] = true
	gen := t.gen
	t.forwarders.Go(func() {
		select {
		case ev := <-ch:
			select {
			case t.fired <- fired{seg, gen, ev}:
			case <-ctx.Done():
			}
		case <-ctx.Done():
		}
	})
}

// mayHold reports whether the container seg may hold a name under
// prefix: a readable segment ("k-") says its name; a hashed one ("h-")
// may hold any.
func mayHold(seg, prefix string) bool {
	plain, ok := strings.CutPrefix(seg, "k-")
	if !ok {
		return true
	}
	name, err := url.PathUnescape(plain)
	return err != nil || strings.HasPrefix(name, prefix)
}
