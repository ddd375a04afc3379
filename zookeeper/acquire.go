package zookeeper

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// nodePrefix is the label of a writer's (a mutex's) queue node: the last
// part of its name, to which ZooKeeper appends a ten-digit sequence
// number, after the protected create's "_c_<id>-". Readers and permits
// have labels of their own (kinds.go).
const nodePrefix = "lock-"

func (d *driver) Acquire(ctx context.Context, req backends.Request) (backends.Hold, error) {
	h, err := d.acquire(ctx, req)
	if errors.Is(err, errSessionExpired) && !errors.Is(err, backends.ErrUnavailable) {
		// The session died under the acquisition: an outage to the caller.
		err = driverkit.Unavailable("zookeeper acquire", err)
	}
	return h, err
}

func (d *driver) acquire(ctx context.Context, req backends.Request) (backends.Hold, error) {
	s, err := d.session(ctx, req.TTL)
	if err != nil {
		return nil, err
	}
	parent := d.root + "/" + segment(req.Name)
	k := kindOf(req)
	if !req.Wait {
		// A TryLock on a name whose entries refuse it costs one read (and
		// a sync) and writes nothing.
		kids, err := call(ctx, s, "list queue", func() ([]string, error) {
			kids, _, err := s.conn.Children(parent)
			return kids, err
		})
		if err == nil && k.looksRefused(d.live(parent, kids)) {
			// The server this session reads from may lag behind the
			// leader: a release another client made a moment ago may not
			// show yet. Catch it up (sync) before saying "held"; only a
			// name that looks held pays for it.
			kids, err = call(ctx, s, "sync and list queue", func() ([]string, error) {
				if _, err := s.conn.Sync(parent); err != nil {
					return nil, err
				}
				kids, _, err := s.conn.Children(parent)
				return kids, err
			})
		}
		switch {
		case errors.Is(err, zk.ErrNoNode):
		case err != nil:
			return nil, err
		default:
			if err := d.refuse(ctx, s, parent, req.Name, k, d.live(parent, kids)); err != nil {
				return nil, err
			}
		}
	}
	data := nodeValue(req)
	node, czxid, err := d.enqueue(ctx, s, parent, k.label(), data)
	if err != nil {
		return nil, err
	}
	h := newHold(s, node, k, data)
	h.czxid = czxid
	if err := d.waitTurn(ctx, s, parent, req.Name, h, req.Wait); err != nil {
		h.forget()
		d.deleteNode(s, node)
		return nil, err
	}
	return h, nil
}

// enqueue creates this acquisition's ephemeral sequential node, making the
// name's parent (a container node, which the server removes once empty)
// when it is missing, and returns its path and, when the answer said, its
// czxid (0 when not).
//
// The create goes in one multi with an unconditional setData on the
// parent (createWithZxid): the setData's answer carries the transaction's
// zxid, which is the new node's czxid, the fencing token. go-zookeeper
// has no create2, so the token would otherwise cost a read of the node
// (measured in docs/benchmarks.md, "Before and after: ZooKeeper's token
// without a read").
//
// The create is protected, in Curator's way, with an id of our own in the
// node's name ("_c_<id>-" and the kind's label, go-zookeeper's format): after a lost
// answer it finds its own node again instead of orphaning it or queueing
// twice. The create is detached from ctx (bounded by the request timeout)
// so that its outcome is known before the caller's error goes back; if it
// stays unknown, the janitor finds the node by its id and deletes it.
func (d *driver) enqueue(ctx context.Context, s *session, parent, label string, data []byte) (string, int64, error) {
	prefix := protectedPrefix + driverkit.NewID() + "-" + label
	type created struct {
		path  string
		czxid int64
	}
	create := func() (created, error) {
		node, czxid, err := d.createWithZxid(s, parent+"/"+prefix, data)
		if errors.Is(err, zk.ErrConnectionClosed) {
			// The answer was lost with the connection; the create may have
			// been applied. Look for it once the client has reconnected.
			if found, ferr := findAfterReconnect(s, parent, prefix); ferr == nil {
				return created{path: found}, nil
			}
		}
		return created{node, czxid}, err
	}
	dctx := context.WithoutCancel(ctx)
	for range 3 {
		c, err := call(dctx, s, "enqueue", create)
		if err == nil && ctx.Err() != nil {
			// Made, but the caller gave up meanwhile: take it back.
			d.deleteNode(s, c.path)
			return "", 0, ctx.Err()
		}
		if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, errSessionExpired) {
			// Outcome unknown: the node may appear later.
			d.deleteByID(s, parent, prefix)
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return c.path, c.czxid, err
		}
		// The parent is missing (new name, or removed as an empty container
		// a moment ago): make it and try again.
		err = do(ctx, s, "create parent", func() error {
			_, err := s.conn.CreateContainer(parent, nil, zk.FlagContainer, d.acl)
			return err
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return "", 0, err
		}
	}
	return "", 0, driverkit.Unavailable("zookeeper enqueue", fmt.Errorf("the parent of %s keeps vanishing", parent))
}

// createWithZxid creates the ephemeral sequential node path (its parent,
// the name's node, must exist) and returns its czxid with its name: one
// multi of the create and a setData of empty data on the parent, whose
// stat's mzxid is the multi's zxid, so the new node's czxid. Nothing reads
// the parent's data, and a setData fires no children watch. A parent whose
// ACL lets this client create but not write (made by another tool) refuses
// the multi as a whole; then this driver creates alone from there on, and
// the czxid is read with the queue's first look (0 here).
func (d *driver) createWithZxid(s *session, path string, data []byte) (string, int64, error) {
	if !d.createOnly.Load() {
		parent := path[:strings.LastIndexByte(path, '/')]
		res, err := s.conn.Multi(
			&zk.CreateRequest{Path: path, Data: data, Acl: d.acl, Flags: zk.FlagEphemeral | zk.FlagSequence},
			&zk.SetDataRequest{Path: parent, Data: []byte{}, Version: -1})
		switch {
		case err == nil && len(res) == 2 && res[1].Stat != nil:
			return res[0].String, res[1].Stat.Mzxid, nil
		case err == nil:
			return "", 0, fmt.Errorf("zookeeper: a multi's answer without the setData's stat: %+v", res)
		case len(res) != 2 || res[0].Error != nil || !errors.Is(res[1].Error, zk.ErrNoAuth):
			return "", 0, err
		}
		d.createOnly.Store(true) // the setData was refused, not the create
	}
	node, err := s.conn.Create(path, data, zk.FlagEphemeral|zk.FlagSequence, d.acl)
	return node, 0, err
}

// protectedPrefix starts every queue node's name, before its id.
const protectedPrefix = "_c_"

// findAfterReconnect is findNode for a create whose connection closed
// under it: asked at once, the lookup may go out on the closing connection
// and fail the same way (go-zookeeper fails every request in flight there
// with ErrConnectionClosed), or find no server accepting a connection yet
// (ErrNoServer, at once, while go-zookeeper waits to dial again), so it is
// asked again, 10ms apart, until go-zookeeper has reconnected to the
// session, for up to a request timeout, while the session lives.
func findAfterReconnect(s *session, parent, prefix string) (string, error) {
	deadline := time.Now().Add(cmp.Or(s.d.reqTimeout, driverkit.DefaultRequestTimeout))
	for {
		found, err := findNode(s, parent, prefix)
		retry := errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer)
		if !retry || time.Now().After(deadline) {
			return found, err
		}
		select {
		case <-s.expired:
			return "", err
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// findNode returns the child of parent whose name starts with prefix.
func findNode(s *session, parent, prefix string) (string, error) {
	kids, _, err := s.conn.Children(parent)
	if err != nil {
		return "", err
	}
	for _, k := range kids {
		if strings.HasPrefix(k, prefix) {
			return parent + "/" + k, nil
		}
	}
	return "", zk.ErrNoNode
}

// deleteByID removes the node of a create whose outcome is unknown, found
// by its id. It looks again until a session timeout has passed since the
// first look: by then the create has been applied or will never be.
func (d *driver) deleteByID(s *session, parent, prefix string) {
	first := time.Now()
	d.janitor.Go(func(ctx context.Context) error {
		node, err := call(ctx, s, "find node", func() (string, error) { return findNode(s, parent, prefix) })
		switch {
		case errors.Is(err, errSessionExpired):
			return nil // the server deleted every node of the session
		case errors.Is(err, zk.ErrNoNode):
			if time.Since(first) > s.ttl {
				return nil
			}
			return errors.New("not there yet; looking again")
		case err != nil:
			return err
		}
		return do(ctx, s, "delete", func() error {
			err := s.conn.Delete(node, -1)
			if errors.Is(err, zk.ErrNoNode) {
				return nil
			}
			return err
		})
	})
}

// rideOut reports whether a waiter should look again after err, having
// paused: it should while the error is an outage (a connection closed in
// a leader election, a server that did not answer) and the session lives,
// since ZooKeeper keeps the session, and the queue node, across them. The
// session ends after a whole session timeout without a connection (see
// session.go), and then the waiter gives up with ErrUnavailable.
func rideOut(ctx context.Context, s *session, err error, attempt int) bool {
	if !errors.Is(err, backends.ErrUnavailable) || errors.Is(err, errSessionExpired) || !s.alive() || ctx.Err() != nil {
		return false
	}
	t := time.NewTimer(rideOutBackoff.NextBackoff(attempt))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.expired:
	case <-ctx.Done():
	}
	return false
}

// rideOutBackoff paces a waiter's looks during an outage.
var rideOutBackoff = backends.ExponentialBackoff(20*time.Millisecond, 500*time.Millisecond)

// node is what a read of a queue node tells: its czxid.
type node struct {
	czxid int64
}

// readNode reads one of the session's own queue nodes, and watches it (see
// hold); a node that is gone means the session that made it expired.
func readNode(ctx context.Context, s *session, path string) (node, error) {
	n, err := call(ctx, s, "read token", func() (node, error) {
		// GetW, not ExistsW: a watch set on a node that is gone (a race
		// with a release, a forced release) would wait for a creation that
		// never comes (queue paths are never made again), and stay on the
		// server and in the client until the session ends.
		_, st, _, err := s.conn.GetW(path)
		if err != nil {
			return node{}, err
		}
		return node{czxid: st.Czxid}, nil
	})
	if errors.Is(err, zk.ErrNoNode) {
		return node{}, driverkit.Unavailable("zookeeper acquire", fmt.Errorf("queue node %s vanished: %w", path, errSessionExpired))
	}
	return n, err
}

// look lists the queue and reads h's node at once: go-zookeeper pipelines
// concurrent requests on its one connection, so both cost one round trip.
func look(ctx context.Context, s *session, parent, path string) ([]string, node, error) {
	var (
		n    node
		nerr error
		wg   sync.WaitGroup
	)
	wg.Go(func() { n, nerr = readNode(ctx, s, path) })
	kids, err := call(ctx, s, "list queue", func() ([]string, error) {
		kids, _, err := s.conn.Children(parent)
		return kids, err
	})
	wg.Wait()
	if err != nil {
		return nil, node{}, listErr(err, path)
	}
	return kids, n, nerr
}

// seq is the sequence number ZooKeeper appended to a queue node's name.
func seq(node string) string {
	if len(node) < 10 {
		return node
	}
	return node[len(node)-10:]
}

// deleteNode removes a queue node that must not outlive its use (a
// cancelled waiter's, or a TryLock that lost). The caller waits for the
// first attempt at most driverkit.CleanupWait; the janitor retries while
// the session lives (when it ends, the server deletes the node anyway).
func (d *driver) deleteNode(s *session, node string) {
	d.doomed.Store(node, struct{}{})
	d.janitor.Settle(func(ctx context.Context) error {
		err := do(ctx, s, "delete", func() error { return s.conn.Delete(node, -1) })
		if err == nil || errors.Is(err, zk.ErrNoNode) || errors.Is(err, errSessionExpired) {
			d.doomed.Delete(node)
			return nil
		}
		return err
	})
}

// live returns parent's children kids without this driver's doomed nodes
// (see driver.doomed), in a new slice.
func (d *driver) live(parent string, kids []string) []string {
	var out []string
	for _, k := range kids {
		if _, gone := d.doomed.Load(parent + "/" + k); !gone {
			out = append(out, k)
		}
	}
	return out
}
