package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// waitTurn returns once h's node is granted by backends.Mode's rule, or at
// once with ErrNotAcquired when wait is false and it is not, or with the
// limit mismatch if an entry ahead of it has another limit. The rule, read
// from the queue's names (kinds.go) in sequence order:
//
//   - a writer (Exclusive, limit 1) holds when it is the lowest node;
//   - a permit of n holds when fewer than n nodes are ahead of it;
//   - a reader holds when no writer ahead of it is unshared (a queued
//     writer blocks the readers behind it; a writer that turned into a
//     reader with Share does not).
//
// A writer watches only its predecessor, so a release wakes one waiter; a
// reader watches the last unshared writer ahead (its data, so that a Share
// wakes it too); a permit watches the queue's children.
//
// Each look at the queue lists it and reads h's node (its czxid is the
// fencing token; the read proves the session alive for the grant)
// pipelined on the one connection, so an uncontended acquisition costs two
// round trips after the create, as a bare list would. When a writer's
// deleted predecessor was the head, no lower node can exist (sequence
// numbers only grow), so the hand-off skips the list and only reads h's
// node.
func (d *driver) waitTurn(ctx context.Context, s *session, parent, name string, h *hold, wait bool) (err error) {
	mine := strings.TrimPrefix(h.path, parent+"/")
	predWasHead := false
	// The first look of a hold whose create told its czxid lists the queue
	// with a children watch and reads nothing else: if it grants the hold,
	// that watch tells the hold of its node's deletion (watchByParent), so
	// an uncontended acquisition costs one request after the create.
	// Later looks, after a wait, read the node too (look).
	byParent := h.czxid != 0
	defer func() {
		if err != nil && h.byParent.Load() {
			s.unwatchByParent(h)
		}
	}()
	// The predecessor a writer watches, by its czxid, and the one whose
	// delete woke it (or that was gone when the watch was set): a writer
	// admitted on the look after that delete directly followed it, as no
	// node can come between the two.
	var watched, deleted int64
	for attempt := 0; ; attempt++ {
		if h.byParent.Load() {
			s.unwatchByParent(h) // its look did not grant it
		}
		if predWasHead {
			n, err := readNode(ctx, s, h.path)
			if err != nil {
				if wait && rideOut(ctx, s, err, attempt) {
					continue
				}
				return err
			}
			h.czxid, h.grant, h.follows = n.czxid, s.grant(), deleted
			return nil
		}
		var kids []string
		var n node
		if byParent {
			byParent = false
			s.watchByParent(parent, h)
			n = node{czxid: h.czxid}
			kids, err = call(ctx, s, "list queue", func() ([]string, error) {
				kids, _, _, err := s.conn.ChildrenW(parent)
				return kids, err
			})
			err = listErr(err, h.path)
		} else {
			kids, n, err = look(ctx, s, parent, h.path)
		}
		if err != nil {
			if wait && rideOut(ctx, s, err, attempt) {
				continue
			}
			return err
		}
		ahead, ok := before(kids, mine)
		if !ok {
			return vanished(h.path)
		}
		// Nodes of this driver's abandoned acquisitions were never
		// granted: their limits are no one's, and a TryLock behind them
		// only holds.
		if err := h.kind.mismatch(name, d.live(parent, ahead)); err != nil {
			return err
		}
		if !wait {
			ahead = d.live(parent, ahead)
		}
		var ch <-chan zk.Event // what wakes the waiter when a look refused it
		switch {
		case h.kind.mode == backends.Shared:
			var w string
			var skipped bool
			w, ch, skipped, err = d.blocker(ctx, s, parent, ahead, wait)
			if err == nil && w == "" && skipped {
				// A writer that the listing showed ahead was gone when
				// read. It may have gone with the whole queue, this
				// reader's node and the name's node among them (an
				// operator deleting the name: one multi-op), after the
				// listing showed the reader's node: look again, the
				// queue and the reader's own node, before holding. The
				// writers gone never come back, and nodes made meanwhile
				// queue behind the reader.
				attempt = -1
				continue
			}
			if err == nil && w == "" {
				h.czxid, h.grant = n.czxid, s.grant()
				return nil
			}
		case len(ahead) < h.kind.limit:
			h.czxid, h.grant = n.czxid, s.grant()
			if h.kind == writer {
				h.follows = deleted
			}
			return nil
		case !wait:
			return backends.ErrNotAcquired
		case h.kind.limit > 1:
			var granted bool
			granted, ch, err = d.watchRank(ctx, s, parent, mine, h.kind.limit)
			if err == nil && granted {
				h.czxid, h.grant = n.czxid, s.grant()
				return nil
			}
		default:
			pred := parent + "/" + ahead[len(ahead)-1]
			var exists bool
			exists, watched, ch, err = watchNode(ctx, s, pred)
			deleted = 0
			if err == nil && !exists {
				// Gone before the watch was set: look again at once. If
				// this driver's hold released it, the ring of released
				// nodes knows its czxid.
				attempt, predWasHead = -1, len(ahead) == 1
				if h.kind == writer {
					deleted = d.released.czxid(pred)
				}
				continue
			}
		}
		if h.byParent.Load() {
			// Not granted: the look's children watch is no longer the
			// hold's. Dropped before the wait, so that a change under the
			// name while it waits costs it no read.
			s.unwatchByParent(h)
		}
		if err != nil {
			if wait && rideOut(ctx, s, err, attempt) {
				continue
			}
			return err
		}
		if !wait {
			return backends.ErrNotAcquired
		}
		attempt = -1 // a look that got through: the next failure starts over
		select {
		case ev := <-ch:
			// A writer whose predecessor, the head, was deleted holds now.
			predWasHead = ev.Type == zk.EventNodeDeleted && h.kind == writer && len(ahead) == 1
			if ev.Type == zk.EventNodeDeleted && h.kind == writer {
				deleted = watched
			}
		case <-s.expired:
			return driverkit.Unavailable("zookeeper wait", errSessionExpired)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// before sorts kids by sequence and returns those ahead of mine; ok is
// false if mine is not among them.
func before(kids []string, mine string) (ahead []string, ok bool) {
	slices.SortFunc(kids, func(a, b string) int { return strings.Compare(seq(a), seq(b)) })
	i := slices.Index(kids, mine)
	if i < 0 {
		return nil, false
	}
	return kids[:i], true
}

// vanished is the error of an acquisition whose own queue node, at path,
// is gone while it waits or looks: deleted by an operator (a forced
// release, a deleted name) or with its session. It never held, and it
// holds nothing now: the caller gets ErrUnavailable, as when the node's
// own read finds it gone (readNode).
func vanished(path string) error {
	return driverkit.Unavailable("zookeeper wait", fmt.Errorf("queue node %s vanished: %w", path, errSessionExpired))
}

// listErr classifies the error of a listing of the queue that holds the
// node at path, made after that node's create: zk.ErrNoNode there says
// that the name's node, its parent, is gone. The server removes a parent
// only once it is empty (a container; a delete of a node with children is
// refused), so the acquisition's own node went first: vanished, never a
// raw ZooKeeper error, and never an empty queue that would grant it.
func listErr(err error, path string) error {
	if errors.Is(err, zk.ErrNoNode) {
		return vanished(path)
	}
	return err
}

// watchNode sets a data watch on path, which fires when it is deleted or
// its data changes (a Share), and returns the node's czxid if it exists.
// A data watch, not an exists watch: a predecessor is often gone before
// its watch is set (often, on a contended name), and an
// exists watch on a missing node waits for a creation that never comes
// (queue paths are never made again), staying on the server and in the
// client until the session ends; a data read of a missing node sets none
// (Curator's LockInternals reads data for the same reason).
func watchNode(ctx context.Context, s *session, path string) (bool, int64, <-chan zk.Event, error) {
	type watch struct {
		exists bool
		czxid  int64
		ch     <-chan zk.Event
	}
	w, err := call(ctx, s, "watch predecessor", func() (watch, error) {
		_, st, ch, err := s.conn.GetW(path)
		if errors.Is(err, zk.ErrNoNode) {
			return watch{}, nil // gone: no watch set
		}
		if err != nil {
			return watch{}, err
		}
		return watch{exists: true, czxid: st.Czxid, ch: ch}, nil
	})
	return w.exists, w.czxid, w.ch, err
}

// blocker returns the last writer among ahead (nodes under parent) that
// is not shared: what keeps a reader out. With watch, its data is read
// with a watch, returned, that fires when it is deleted or shared. It
// returns "" if there is none: the reader holds, if its own node was
// there after the reads. skipped says that a writer it read was gone
// (released since the listing, or deleted with the whole queue).
func (d *driver) blocker(ctx context.Context, s *session, parent string, ahead []string, watch bool) (_ string, _ <-chan zk.Event, skipped bool, _ error) {
	ws := writers(ahead)
	for i := len(ws) - 1; i >= 0; i-- {
		path := parent + "/" + ws[i]
		type read struct {
			data []byte
			ch   <-chan zk.Event
		}
		r, err := call(ctx, s, "read writer ahead", func() (read, error) {
			if watch {
				data, _, ch, err := s.conn.GetW(path)
				return read{data, ch}, err
			}
			data, _, err := s.conn.Get(path)
			return read{data, nil}, err
		})
		switch {
		case errors.Is(err, zk.ErrNoNode):
			skipped = true
			continue // released meanwhile: it keeps no one out
		case err != nil:
			return "", nil, skipped, err
		case !shared(r.data):
			return path, r.ch, skipped, nil
		}
	}
	return "", nil, skipped, nil
}

// watchRank lists the queue with a children watch, and reports whether
// fewer than limit nodes are ahead of mine now. Any release ahead of a
// permit may be its turn, so it watches them all (the queue's children),
// not one node.
func (d *driver) watchRank(ctx context.Context, s *session, parent, mine string, limit int) (bool, <-chan zk.Event, error) {
	type watch struct {
		kids []string
		ch   <-chan zk.Event
	}
	w, err := call(ctx, s, "watch queue", func() (watch, error) {
		kids, _, ch, err := s.conn.ChildrenW(parent)
		return watch{kids, ch}, err
	})
	if err != nil {
		return false, nil, listErr(err, parent+"/"+mine)
	}
	ahead, ok := before(w.kids, mine)
	if !ok {
		return false, nil, vanished(parent + "/" + mine)
	}
	return len(ahead) < limit, w.ch, nil
}

// looksRefused reports whether a TryLock of kind k may be refused by the
// queue's live entries, read from their names alone: then it syncs and
// looks again (refuse) before it answers.
func (k kind) looksRefused(live []string) bool {
	switch {
	case len(live) == 0:
		return false
	case k.mismatch("", live) != nil:
		return true
	case k.mode == backends.Shared:
		return len(writers(live)) > 0
	}
	return len(live) >= k.limit
}

// refuse returns why a TryLock of kind k on name is refused by the live
// entries of its queue under parent, without queueing: a limit mismatch,
// or ErrNotAcquired. nil means it may queue and look.
func (d *driver) refuse(ctx context.Context, s *session, parent, name string, k kind, live []string) error {
	if err := k.mismatch(name, live); err != nil {
		return err
	}
	if k.mode == backends.Shared {
		// Before the create: a writer gone since the listing lets it
		// queue, and its own look decides.
		w, _, _, err := d.blocker(ctx, s, parent, live, false)
		switch {
		case err != nil:
			return err
		case w != "":
			return backends.ErrNotAcquired
		}
		return nil
	}
	if len(live) >= k.limit {
		return backends.ErrNotAcquired
	}
	return nil
}
