package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/padlock-go/padlock/driverkit"
)

// Watch pushes the changes of name's leader to Observe with two
// ZooKeeper watches: a children watch on the name's parent (a grant,
// release or expiry changes the lowest node), or an exists watch on the
// parent while it is missing, and a data watch on the lowest node (a
// Proclaim). Each fires once: it is set again before the signal, so a
// change between the fire and the new watch is in what the observer then
// reads, and a change after it fires the new one. A children change that
// leaves the lowest node in place (a candidate queued or left) is no
// change of leader and is not signalled. The goroutine ends, and the
// channel closes, when ctx ends; a watch the server still has then goes
// with its next change or the session.
func (d *driver) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	w := &watcher{d: d, parent: d.root + "/" + segment(name)}
	// Armed before Watch returns: a change right after it is signalled.
	if err := w.arm(ctx, true); err != nil {
		return nil, err
	}
	out := make(chan struct{}, 1)
	go w.run(ctx, out)
	return out, nil
}

// watcher is one Watch's state: the session its watches are on, and the
// watches armed (nil once fired).
type watcher struct {
	d      *driver
	parent string
	s      *session
	kids   <-chan zk.Event // the parent's children, or its creation while it is missing
	data   <-chan zk.Event // the head's data and deletion
	head   string          // the lowest node when kids was armed ("" none)
}

// run waits for a watch to fire, arms again and signals, until ctx ends.
// While the watches cannot be set (no server), it tries again with
// backoff; Observe polls meanwhile.
func (w *watcher) run(ctx context.Context, out chan<- struct{}) {
	defer close(out)
	for {
		var expired <-chan struct{}
		if w.s != nil {
			expired = w.s.expired
		}
		var ev zk.Event
		fresh, changed := false, false
		select {
		case <-ctx.Done():
			return
		case ev = <-w.kids:
			w.kids = nil
		case ev = <-w.data:
			w.data, changed = nil, true
		case <-expired:
			// A new session, and every watch with it (the dead one's go
			// with its connection).
			w.s, w.kids, w.data, fresh = nil, nil, nil, true
		}
		if ev.Type == zk.EventNotWatching {
			// The connection dropped its watches (it closed, or the
			// session expired): set them all again.
			w.kids, w.data, fresh = nil, nil, true
		}
		for attempt := 0; ; attempt++ {
			before := w.head
			err := w.arm(ctx, fresh)
			if err == nil {
				if fresh || changed || w.head != before {
					signal(out)
				}
				break
			}
			w.s, w.kids, w.data, fresh = nil, nil, nil, true
			if !pause(ctx, attempt) {
				return
			}
		}
	}
}

// signal sends a pending signal, unless one is pending already.
func signal(out chan<- struct{}) {
	select {
	case out <- struct{}{}:
	default:
	}
}

// pause waits before arming again after a failure, or reports false when
// ctx ends.
func pause(ctx context.Context, attempt int) bool {
	t := time.NewTimer(rideOutBackoff.NextBackoff(attempt))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// arm sets the watches that have fired (all of them when fresh, on a live
// session): the parent's, then the head's data watch if the head changed
// or its watch fired. A data watch on a head that is gone by then is not
// set (getData leaves none on a missing node): the children watch fires
// for its deletion.
func (w *watcher) arm(ctx context.Context, fresh bool) error {
	if w.s == nil || !w.s.alive() {
		s, err := w.d.anySession(ctx)
		if err != nil {
			return err
		}
		w.s, w.kids, w.data, fresh = s, nil, nil, true
	}
	if fresh {
		w.head = ""
	}
	s := w.s
	if w.kids == nil {
		head, ch, err := armParent(ctx, s, w.parent)
		if err != nil {
			return err
		}
		if head != w.head {
			w.data = nil // the old head is gone: its watch has fired or will
		}
		w.kids, w.head = ch, head
	}
	if w.data == nil && w.head != "" {
		ch, err := call(ctx, s, "watch leader", func() (<-chan zk.Event, error) {
			_, _, ch, err := s.conn.GetW(w.head)
			return ch, err
		})
		switch {
		case errors.Is(err, zk.ErrNoNode):
			// Deleted since the list: the children watch fires for it.
		case err != nil:
			return err
		default:
			w.data = ch
		}
	}
	return nil
}

// armParent sets a children watch on parent and returns its lowest node's
// path ("" when it has none), or, while parent is missing, an exists watch
// on it, which fires when it is made.
func armParent(ctx context.Context, s *session, parent string) (string, <-chan zk.Event, error) {
	type armed struct {
		head string
		ch   <-chan zk.Event
	}
	a, err := call(ctx, s, "watch election", func() (armed, error) {
		for range 5 {
			kids, _, ch, err := s.conn.ChildrenW(parent)
			switch {
			case err == nil && len(kids) == 0:
				return armed{"", ch}, nil
			case err == nil:
				return armed{parent + "/" + lowest(kids), ch}, nil
			case !errors.Is(err, zk.ErrNoNode):
				return armed{}, err
			}
			exists, _, ch, err := s.conn.ExistsW(parent)
			if err != nil || !exists {
				return armed{"", ch}, err
			}
			// Made between the two: list it again.
		}
		return armed{}, driverkit.Unavailable("zookeeper watch", fmt.Errorf("%s keeps being made and removed", parent))
	})
	return a.head, a.ch, err
}
