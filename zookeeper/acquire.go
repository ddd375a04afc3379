package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// nodePrefix starts the last part of every queue node's name; ZooKeeper
// appends a ten-digit sequence number, and go-zookeeper's protected create
// puts "_c_<id>-" in front.
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
	if !req.Wait {
		// A TryLock on a name someone holds or waits for costs one read
		// (and a sync) and writes nothing.
		kids, err := call(ctx, s, "list queue", func() ([]string, error) {
			kids, _, err := s.conn.Children(parent)
			return kids, err
		})
		if err == nil && len(d.live(parent, kids)) > 0 {
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
		case len(d.live(parent, kids)) > 0:
			return nil, backends.ErrNotAcquired
		}
	}
	node, err := d.enqueue(ctx, s, parent, nodeValue(req))
	if err != nil {
		return nil, err
	}
	h := newHold(s, node)
	if err := d.waitTurn(ctx, s, parent, h, req.Wait); err != nil {
		h.forget()
		d.deleteNode(s, node)
		return nil, err
	}
	return h, nil
}

// enqueue creates this acquisition's ephemeral sequential node, making the
// name's parent (a container node, which the server removes once empty)
// when it is missing.
//
// The create is protected, in Curator's way, with an id of our own in the
// node's name ("_c_<id>-lock-", go-zookeeper's format): after a lost
// answer it finds its own node again instead of orphaning it or queueing
// twice. The create is detached from ctx (bounded by the request timeout)
// so that its outcome is known before the caller's error goes back; if it
// stays unknown, the janitor finds the node by its id and deletes it.
func (d *driver) enqueue(ctx context.Context, s *session, parent string, data []byte) (string, error) {
	prefix := protectedPrefix + driverkit.NewID() + "-" + nodePrefix
	create := func() (string, error) {
		node, err := s.conn.Create(parent+"/"+prefix, data, zk.FlagEphemeral|zk.FlagSequence, d.acl)
		if errors.Is(err, zk.ErrConnectionClosed) {
			// The answer was lost with the connection; the create may have
			// been applied. Look for it once the client has reconnected.
			if found, ferr := findNode(s, parent, prefix); ferr == nil {
				return found, nil
			}
		}
		return node, err
	}
	dctx := context.WithoutCancel(ctx)
	for range 3 {
		node, err := call(dctx, s, "enqueue", create)
		if err == nil && ctx.Err() != nil {
			// Made, but the caller gave up meanwhile: take it back.
			d.deleteNode(s, node)
			return "", ctx.Err()
		}
		if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, errSessionExpired) {
			// Outcome unknown: the node may appear later.
			d.deleteByID(s, parent, prefix)
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return node, err
		}
		// The parent is missing (new name, or removed as an empty container
		// a moment ago): make it and try again.
		err = do(ctx, s, "create parent", func() error {
			_, err := s.conn.CreateContainer(parent, nil, zk.FlagContainer, d.acl)
			return err
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return "", err
		}
	}
	return "", driverkit.Unavailable("zookeeper enqueue", fmt.Errorf("the parent of %s keeps vanishing", parent))
}

// protectedPrefix starts every queue node's name, before its id.
const protectedPrefix = "_c_"

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

// waitTurn returns once h's node is the lowest in the queue, or at once
// with ErrNotAcquired when wait is false and it is not. It watches only the
// predecessor, so a release wakes one waiter.
//
// Each look at the queue lists it and reads h's node (its czxid is the
// fencing token; the read proves the session alive for the grant)
// pipelined on the one connection, so an uncontended acquisition costs two
// round trips after the create, as a bare list would. When the deleted
// predecessor was the head, no lower node can exist (sequence numbers only
// grow), so the hand-off skips the list and only reads h's node.
func (d *driver) waitTurn(ctx context.Context, s *session, parent string, h *hold, wait bool) error {
	mine := strings.TrimPrefix(h.path, parent+"/")
	predWasHead := false
	for attempt := 0; ; attempt++ {
		if predWasHead {
			n, err := readNode(ctx, s, h.path)
			if err != nil {
				if wait && rideOut(ctx, s, err, attempt) {
					continue
				}
				return err
			}
			h.czxid, h.grant = n.czxid, s.grant()
			return nil
		}
		kids, n, err := look(ctx, s, parent, h.path)
		if err != nil {
			if wait && rideOut(ctx, s, err, attempt) {
				continue
			}
			return err
		}
		slices.SortFunc(kids, func(a, b string) int { return strings.Compare(seq(a), seq(b)) })
		i := slices.Index(kids, mine)
		if i < 0 {
			return driverkit.Unavailable("zookeeper wait", fmt.Errorf("queue node %s vanished: %w", h.path, errSessionExpired))
		}
		if i == 0 || !wait && len(d.live(parent, kids[:i])) == 0 {
			// The head, or behind nodes of this driver's abandoned
			// acquisitions only, which no one holds.
			h.czxid, h.grant = n.czxid, s.grant()
			return nil
		}
		if !wait {
			return backends.ErrNotAcquired
		}
		pred := parent + "/" + kids[i-1]
		type watch struct {
			exists bool
			ch     <-chan zk.Event
		}
		w, err := call(ctx, s, "watch predecessor", func() (watch, error) {
			exists, _, ch, err := s.conn.ExistsW(pred)
			return watch{exists, ch}, err
		})
		if err != nil {
			if rideOut(ctx, s, err, attempt) {
				continue
			}
			return err
		}
		attempt = -1         // a look that got through: the next failure starts over
		deleted := !w.exists // gone before the watch was set
		if !deleted {
			select {
			case ev := <-w.ch:
				deleted = ev.Type == zk.EventNodeDeleted
			case <-s.expired:
				return driverkit.Unavailable("zookeeper wait", errSessionExpired)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		predWasHead = deleted && i == 1
	}
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
		ok, st, _, err := s.conn.ExistsW(path)
		if err == nil && !ok {
			err = zk.ErrNoNode
		}
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
		return nil, node{}, err
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
