package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-zookeeper/zk"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// hold is one acquisition: its queue node while it is the lowest.
//
// A hold costs no request to keep. Its session carries it: ZooKeeper's
// heartbeat keeps the session, and the session's prover certifies how
// long the leader keeps it (proof.go); every read of the node sets a watch
// on it, so its deletion (by an operator, or the session's end) is pushed
// to the client and ends the hold at once (Lost).
type hold struct {
	s     *session
	path  string
	kind  kind   // as created; a Share changes the node's data, not its name
	data  []byte // the node's data as created, or last proclaimed (nodeData)
	czxid int64  // the node's creating transaction: the fencing token
	// follows is the czxid of the node it directly followed, 0 if unknown.
	follows int64
	grant   backends.Grant
	lost    context.Context         // cancelled when the node is gone or the session ended
	gone    context.CancelCauseFunc // cancels lost
	// rearm is set when the node's data changed (a Share), which fired
	// the watch that reports its deletion: Renew sets it again.
	rearm atomic.Bool
	// version is the node's data version as this hold last wrote it (0
	// as created): a Proclaim writes only over it (election.go).
	version int32
	// byParent is set while the hold is watched through its parent's
	// children watch (session.parents), not a watch of its own node.
	byParent atomic.Bool
	// releasing is set when Release begins: the children watch's event
	// that its own delete fires needs no new watch.
	releasing atomic.Bool
}

// newHold returns the hold of the queue node at path, registered with its
// session so that the node's deletion reaches it, from before the first
// read that watches the node.
func newHold(s *session, path string, k kind, data []byte) *hold {
	h := &hold{s: s, path: path, kind: k, data: data}
	h.lost, h.gone = context.WithCancelCause(s.ctx)
	s.held.Store(path, h)
	return h
}

// forget unregisters the hold from its session.
func (h *hold) forget() {
	h.s.held.CompareAndDelete(h.path, h)
	if h.byParent.Load() {
		h.s.unwatchByParent(h)
	}
	h.gone(errReleased)
}

var errReleased = errors.New("released")

func (h *hold) Token() uint64 { return uint64(h.czxid) }

// Follows implements backends.Successor: a writer admitted on the look
// after its watched predecessor's delete followed that node.
func (h *hold) Follows() (uint64, bool) { return uint64(h.follows), h.follows > 0 }
func (h *hold) Grant() backends.Grant   { return h.grant }

// Lost is cancelled when the node was deleted or the session ended, with
// the reason as its cause.
func (h *hold) Lost() context.Context { return h.lost }

// Renew returns the session's certified grant, with no request: the
// session's prover is what proves it (proof.go). It returns ErrNotHeld
// once the node is gone or the session has ended. After a change of the
// node's data (a Share) it sets the node's watch again, one read, until
// that gets through.
func (h *hold) Renew(ctx context.Context) (backends.Grant, error) {
	if h.lost.Err() != nil {
		return backends.Grant{}, fmt.Errorf("%w: zookeeper node %s: %w", backends.ErrNotHeld, h.path, context.Cause(h.lost))
	}
	if h.rearm.Load() {
		if err := h.watchAgain(ctx); err != nil {
			return backends.Grant{}, err
		}
	}
	return h.s.grant(), nil
}

// Release deletes the node, which wakes the next waiter's watch. A node
// that is gone already is ErrNotHeld: the server said so, or expired the
// session, or the session had ended before the release began. A session
// that this client gives up while the release waits for an answer (its
// proof ran out on a silent path) ends a hold that was still held when
// the release began: that is an unanswered release, ErrUnavailable, and
// the node goes with the session.
func (h *hold) Release(ctx context.Context) error {
	endedBefore := !h.s.alive()
	if h.kind == writer {
		h.s.d.released.add(h.path, h.czxid)
	}
	h.releasing.Store(true)
	err := do(ctx, h.s, "release", func() error { return h.s.conn.Delete(h.path, -1) })
	if err == nil || errors.Is(err, zk.ErrNoNode) || errors.Is(err, errSessionExpired) {
		h.forget()
	} else {
		// Still held, as far as anyone knows. A change under the parent
		// while the release was under way left it no watch: set one.
		h.releasing.Store(false)
		if h.rearm.Load() {
			h.watchSoon()
		}
	}
	switch {
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrSessionExpired),
		errors.Is(err, errSessionExpired) && endedBefore:
		return fmt.Errorf("%w: zookeeper node %s is gone: %w", backends.ErrNotHeld, h.path, err)
	case errors.Is(err, errSessionExpired):
		return driverkit.Unavailable("zookeeper release", fmt.Errorf("node %s: the session ended before the server answered; the node goes with it: %w", h.path, err))
	}
	return err
}

// LeaseOf returns the session that keeps h: the renewal loop renews each
// session once for all its holds (RenewLease).
func (d *driver) LeaseOf(h backends.Hold) any { return h.(*hold).s }

// RenewLease returns the session's certified grant and checks each hold
// as Renew does, with no request but for a hold whose watch must be set
// again after a Share. A watch that could not be set fails the renewal
// (ErrUnavailable), as Renew would: it is tried again soon, and the
// holds are lost at the deadline if it never gets through.
func (d *driver) RenewLease(ctx context.Context, lease any, have backends.Grant, holds []backends.Hold) (backends.Grant, []error, error) {
	s := lease.(*session)
	var gone []error
	var failed error
	for i, bh := range holds {
		_, err := bh.(*hold).Renew(ctx)
		switch {
		case errors.Is(err, backends.ErrNotHeld):
			if gone == nil {
				gone = make([]error, len(holds))
			}
			gone[i] = err
		case err != nil:
			failed = err
		}
	}
	if failed != nil {
		return backends.Grant{}, gone, failed
	}
	return s.grant(), gone, nil
}

// RenewBatch renews holds as Renew does, with no request at all.
func (d *driver) RenewBatch(ctx context.Context, holds []backends.Hold) []backends.RenewResult {
	out := make([]backends.RenewResult, len(holds))
	for i, h := range holds {
		out[i].Grant, out[i].Err = h.Renew(ctx)
	}
	return out
}

// errNodeDeleted is the cause of a hold's loss when its node was deleted
// while it was held: a forced release, or the session's expiry.
var errNodeDeleted = errors.New("zookeeper node deleted")

// onEvent handles every event of the session's connection: the session's
// own (onSessionEvent), and a watch's, which goes to the hold whose node it
// is about. It runs on go-zookeeper's goroutines, so it never blocks.
func (s *session) onEvent(ev zk.Event) {
	switch {
	case ev.Type == zk.EventSession:
		s.onSessionEvent(ev)
	case ev.Type == zk.EventNotWatching && errors.Is(ev.Err, zk.ErrSessionExpired):
		s.kill("the server expired it")
	case ev.Type == zk.EventNodeDeleted:
		if h, ok := s.held.Load(ev.Path); ok {
			h.(*hold).gone(errNodeDeleted)
		}
		// A children watch on a parent that went while the connection was
		// down reports the parent's deletion when it is set again on
		// reconnecting, not a change of its children.
		s.parentChanged(ev.Path)
	case ev.Type == zk.EventNodeDataChanged:
		if h, ok := s.held.Load(ev.Path); ok {
			h.(*hold).rearm.Store(true)
		}
	case ev.Type == zk.EventNodeChildrenChanged:
		s.parentChanged(ev.Path)
	}
}

// watchByParent notes that h, being granted on a look that set a children
// watch on parent, is watched through it (see session.parents). It is
// called before that look is sent, so that the watch's event cannot come
// before it: an event of an earlier watch costs only an early watch of
// h's own node.
func (s *session) watchByParent(parent string, h *hold) {
	s.parentMu.Lock()
	defer s.parentMu.Unlock()
	if s.parents == nil {
		s.parents = make(map[string][]*hold)
	}
	s.parents[parent] = append(s.parents[parent], h)
	h.byParent.Store(true)
}

// unwatchByParent undoes watchByParent: for a hold that the look did not
// grant, or that is gone.
func (s *session) unwatchByParent(h *hold) {
	parent := h.path[:strings.LastIndexByte(h.path, '/')]
	s.parentMu.Lock()
	defer s.parentMu.Unlock()
	h.byParent.Store(false)
	hs := s.parents[parent]
	if i := slices.Index(hs, h); i >= 0 {
		hs = slices.Delete(hs, i, i+1)
	}
	if len(hs) == 0 {
		delete(s.parents, parent)
	} else {
		s.parents[parent] = hs
	}
}

// parentChanged handles the event of a children watch on parent: a node
// was created or deleted there, maybe one of the holds watched through it.
// Each of them gets a watch of its own node at once, by a read on the
// janitor (the event handler never blocks), which finds its node gone if
// that was the change; until the read gets through, the renewal sets it
// too (rearm). A hold whose release has begun needs none: the change is
// likely its own delete, and if its release fails, Release sets it.
func (s *session) parentChanged(parent string) {
	s.parentMu.Lock()
	hs := s.parents[parent]
	delete(s.parents, parent)
	for _, h := range hs {
		h.byParent.Store(false)
	}
	s.parentMu.Unlock()
	for _, h := range hs {
		if h.lost.Err() != nil {
			continue
		}
		h.rearm.Store(true)
		if !h.releasing.Load() {
			h.watchSoon()
		}
	}
}

// watchSoon sets the watch of h's own node on the janitor, unless it is
// gone or the renewal sets it first (rearm).
func (h *hold) watchSoon() {
	h.s.d.janitor.Go(func(ctx context.Context) error {
		if h.lost.Err() != nil || !h.rearm.Load() {
			return nil
		}
		return h.watchAgain(ctx)
	})
}

// releasedNodes keeps the paths and czxids of the last writer nodes that
// this driver's holds deleted on release, in a ring of fixed size.
type releasedNodes struct {
	mu    sync.Mutex
	nodes [64]struct {
		path  string
		czxid int64
	}
	next int
}

// add notes that the writer node at path, created in czxid, is being
// deleted by its hold's release.
func (r *releasedNodes) add(path string, czxid int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nodes[r.next].path, r.nodes[r.next].czxid = path, czxid
	r.next = (r.next + 1) % len(r.nodes)
}

// czxid returns the czxid of the node at path if it is among the last
// released, or 0.
func (r *releasedNodes) czxid(path string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.nodes {
		if n.path == path {
			return n.czxid
		}
	}
	return 0
}
