package etcd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// queueLinger is how long a queue keeps its watch after its last waiter
// left, while the name stays contended: a client that waits for a name
// again and again keeps one watch on it instead of creating one per wait.
// A queue with no waiter ends sooner, as soon as it sees the name free
// (no key under it): contention is over, and an idle watch would only
// make every later put and delete on the name fan out to this client
// (see drained).
const queueLinger = 5 * time.Second

// queue follows one name's queue for the driver's waiters on that name.
//
// It keeps one watch on the name's prefix, started at the current revision
// (a watch that starts in the past is served by etcd's catch-up loop, every
// 100ms), and reads the keys once, at the revision the watch started from.
// From then on every put and delete under the name arrives as an event, so
// the queue is known at each revision without reading it again: a waiter
// holds the lock once the keys ahead of it (older ones), as of a revision
// at or after its own put, admit it by backends.Mode's rule (a mutex: once
// its key is the oldest; see ahead.admit). A hand-off costs the release's
// one write and one event to each client waiting on the name; no waiter
// reads on the way. (Watching only the
// predecessor, as concurrency.Mutex does, wakes one client per release, but
// a waiter cannot tell from its predecessor's delete whether the
// predecessor held the lock or gave up waiting, so every waiter that was
// not second in line when it came read the queue again on its hand-off.)
//
// All of a driver's watches share the client's one watch stream.
type queue struct {
	d         *driver
	name, pfx string
	stop      context.CancelFunc

	mu      sync.Mutex
	keys    map[string]claim // live keys under pfx and what they claim
	rev     int64            // keys is exact as of this revision; 0 while unknown
	waiters map[*waiter]struct{}
	idle    *time.Timer // ends the queue when it has had no waiter for queueLinger
	idles   int         // idle spells so far: tells a stale timer from the current one
	closed  bool        // the driver closed: no more idle timers
}

// waiter is one acquisition waiting in a queue.
type waiter struct {
	claim            // its key's
	turn  chan error // buffered; nil when it holds the lock, else why it never will
	// follows is the token (create revision) of the key it directly
	// followed, 0 if unknown; set before a nil is sent on turn.
	follows int64
}

var errKeyVanished = fmt.Errorf("%w: etcd queue key vanished while waiting (session lease expired)", backends.ErrUnavailable)

// join adds w to the queue of name, starting one if the driver has none.
func (d *driver) join(name, pfx string, w *waiter) (*queue, error) {
	d.qmu.Lock()
	defer d.qmu.Unlock()
	if d.queues == nil {
		return nil, backends.ErrClosed
	}
	q := d.queues[name]
	if q == nil {
		ctx, stop := context.WithCancel(d.ctx)
		q = &queue{d: d, name: name, pfx: pfx, stop: stop, waiters: map[*waiter]struct{}{}}
		d.queues[name] = q
		d.bg.Go(func() { q.run(ctx) })
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.idle != nil {
		q.idle.Stop()
		q.idle = nil
	}
	q.waiters[w] = struct{}{}
	q.settleLocked()
	return q, nil
}

// wait waits for w's turn, or for ctx or the session's lease to end.
func (q *queue) wait(ctx context.Context, w *waiter, s *session) error {
	select {
	case err := <-w.turn:
		return err
	case <-ctx.Done():
		q.leave(w)
		return ctx.Err()
	case <-s.lost.Done():
		q.leave(w)
		return driverkit.Unavailable("etcd wait", errors.New("session lease lost while waiting"))
	}
}

func (q *queue) leave(w *waiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.removeLocked(w)
}

func (q *queue) removeLocked(w *waiter) {
	if _, ok := q.waiters[w]; !ok {
		return
	}
	delete(q.waiters, w)
	if len(q.waiters) == 0 && q.idle == nil && !q.closed {
		q.idles++
		n := q.idles
		q.idle = time.AfterFunc(queueLinger, func() { q.expire(n) })
	}
}

// expire ends the queue if it is still in idle spell n.
func (q *queue) expire(n int) {
	q.d.qmu.Lock()
	defer q.d.qmu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.idle == nil || q.idles != n || len(q.waiters) > 0 {
		return // a waiter came back meanwhile
	}
	if q.d.queues != nil && q.d.queues[q.name] == q {
		delete(q.d.queues, q.name)
	}
	q.idle.Stop() // when drained ended it first
	q.idle, q.closed = nil, true
	q.stop()
}

// closeQueues ends every queue; no queue starts after it.
func (d *driver) closeQueues() {
	d.qmu.Lock()
	defer d.qmu.Unlock()
	for _, q := range d.queues {
		q.mu.Lock()
		if q.idle != nil {
			q.idle.Stop()
		}
		q.closed = true
		for w := range q.waiters {
			w.turn <- backends.ErrClosed
		}
		clear(q.waiters)
		q.mu.Unlock()
		q.stop()
	}
	d.queues = nil
}

// run follows the queue until ctx ends, starting over (after a backoff)
// whenever the watch ends: a compaction past it, a lost leader, an outage.
func (q *queue) run(ctx context.Context) {
	backoff := backends.ExponentialBackoff(20*time.Millisecond, time.Second)
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(backoff.NextBackoff(attempt))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		if q.follow(ctx) {
			attempt = 0 // it worked for a while: start over at once
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// follow watches the queue and applies what it sees until the watch ends;
// it reports whether it got as far as reading the queue.
func (q *queue) follow(ctx context.Context) bool {
	gen := q.d.watchStream.Load()
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	// clientv3 shares one gRPC stream among the watches whose contexts
	// carry the same metadata; the stream's auth token is the one it
	// opened with.
	wctx = metadata.AppendToOutgoingContext(wctx, "padlock-watch-stream", strconv.FormatInt(gen, 10))
	defer q.forget()
	wch := q.d.cli.Watch(wctx, q.pfx, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	loaded := false
	for resp := range wch {
		if resp.Canceled || resp.Err() != nil {
			if resp.CompactRevision != 0 {
				// Resumed past a compaction: the events in between are
				// gone, so the queue is read again from scratch.
				q.d.log.Debug("padlock: etcd queue watch compacted; reading the queue again",
					"prefix", q.pfx, "compact_revision", resp.CompactRevision)
			}
			switch err := resp.Err(); {
			case denied(err):
				q.fail(accessDenied("watch queue", err))
			case staleToken(err):
				q.d.freshWatchStream(ctx, gen)
			}
			return loaded
		}
		if resp.Created {
			// Every event after the header's revision arrives on the
			// watch; some at or before it may too (and a resumed watch
			// repeats the header's): apply skips those.
			if err := q.load(ctx, resp.Header.Revision); err != nil {
				if errors.Is(err, backends.ErrAccessDenied) {
					q.fail(err)
				}
				return false
			}
			loaded = true
			continue
		}
		q.apply(resp.Events)
		if n, ok := q.drained(); ok {
			q.d.log.Debug("padlock: etcd queue drained; its watch ends", "prefix", q.pfx)
			q.expire(n) // ends ctx, and with it this watch
		}
	}
	return loaded
}

// drained reports whether the queue should end now, and in which idle
// spell: no waiter of this driver is left, and the name is free (no key
// under it, as of the known revision). Until then a queue without waiters
// lingers for queueLinger; a free name means the contention that kept it
// is over (a client that loops on it alone pays for each idle watch on
// the name: etcd sends it every put and delete).
func (q *queue) drained() (int, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.idles, q.idle != nil && len(q.waiters) == 0 && q.rev != 0 && len(q.keys) == 0
}

// freshWatchStream moves the driver's watches to a new gRPC stream after
// the server refused stream gen's auth token (dropped, or expired while
// the stream stayed open): the next watches open one with a token the
// client has just renewed. The renewal is a read, which clientv3 retries
// with a new login when its token is refused.
func (d *driver) freshWatchStream(ctx context.Context, gen int64) {
	if d.watchStream.Load() != gen {
		return // another queue did it
	}
	err := d.call(ctx, "log in again", func(ctx context.Context) error {
		_, err := d.cli.Get(ctx, d.prefix+"/", clientv3.WithCountOnly())
		return err
	})
	if err != nil {
		d.log.Warn("padlock: etcd token renewal for watches failed", "err", err)
	}
	d.watchStream.CompareAndSwap(gen, gen+1)
}

// load reads the queue as of revision rev.
func (q *queue) load(ctx context.Context, rev int64) error {
	var resp *clientv3.GetResponse
	err := q.d.call(ctx, "read queue", func(ctx context.Context) (err error) {
		resp, err = q.d.cli.Get(ctx, q.pfx, clientv3.WithPrefix(), clientv3.WithRev(rev))
		return err
	})
	if err != nil {
		return err
	}
	keys := make(map[string]claim, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		keys[string(kv.Key)] = parseClaim(string(kv.Key), kv.CreateRevision, kv.Value)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.keys, q.rev = keys, rev
	q.settleLocked()
	return nil
}

// apply applies one watch response: the events of one or more whole
// revisions. Events at or before the known revision (a watch resumed by
// the client after a reconnection may repeat some) are skipped. The
// waiters are settled after each revision, as of that revision: a waiter
// admitted by a delete knows whose key it followed, even when the next
// holder's whole hold came in the same response (a watch catching up).
func (q *queue) apply(events []*clientv3.Event) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.rev == 0 {
		return
	}
	from := q.rev
	var gone []claim
	changed := false
	for i, ev := range events {
		if ev.Kv.ModRevision > from {
			changed = true
			if ev.Type == mvccpb.DELETE {
				if c, ok := q.keys[string(ev.Kv.Key)]; ok {
					gone = append(gone, c)
				}
				delete(q.keys, string(ev.Kv.Key))
			} else {
				// A put is a new key, or a writer turned reader (Share).
				q.keys[string(ev.Kv.Key)] = parseClaim(string(ev.Kv.Key), ev.Kv.CreateRevision, ev.Kv.Value)
			}
			q.rev = max(q.rev, ev.Kv.ModRevision)
		}
		if changed && (i == len(events)-1 || events[i+1].Kv.ModRevision != ev.Kv.ModRevision) {
			q.settleGoneLocked(gone)
			gone, changed = gone[:0], false
		}
	}
}

// fail ends every wait with err: the server refuses this client the
// queue (its permission was revoked, its password changed), which no
// retry will mend.
func (q *queue) fail(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for w := range q.waiters {
		w.turn <- err
		q.removeLocked(w)
	}
}

// forget drops the queue's state when its watch ends: until a new watch
// reads it again, nobody's turn can be known.
func (q *queue) forget() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.keys, q.rev = nil, 0
}

// settleLocked is settleGoneLocked with no key known to have just gone.
func (q *queue) settleLocked() { q.settleGoneLocked(nil) }

// settleGoneLocked tells every waiter whose key the known state covers whether
// it holds the lock (by backends.Mode's rule, over the keys ahead of it:
// see ahead.admit) or never will (its key is gone, or a key ahead asks
// another limit). gone are the keys that the events just applied
// deleted: a waiter admitted now directly followed the oldest of them
// ahead of it (the oldest key holds; every key ahead of the waiter went
// for it to be admitted), which it records (waiter.follows).
func (q *queue) settleGoneLocked(gone []claim) {
	if q.rev == 0 {
		return
	}
	mine := map[string]*waiter{}
	for w := range q.waiters {
		if q.rev < w.rev {
			continue // its own put is not seen yet
		}
		if c, ok := q.keys[w.key]; !ok || c.rev != w.rev {
			w.turn <- errKeyVanished
			q.removeLocked(w)
			continue
		}
		mine[w.key] = w
	}
	if len(mine) == 0 {
		return
	}
	line := make([]claim, 0, len(q.keys))
	for _, c := range q.keys {
		line = append(line, c)
	}
	slices.SortFunc(line, func(a, b claim) int { return cmp.Compare(a.rev, b.rev) })
	var a ahead
	seen := 0
	for _, c := range line {
		if w := mine[c.key]; w != nil {
			switch ok, err := a.admit(q.name, w.claim); {
			case err != nil:
				w.turn <- err
				q.removeLocked(w)
			case ok:
				w.follows = oldestAhead(gone, w.rev)
				w.turn <- nil
				q.removeLocked(w)
			}
			if seen++; seen == len(mine) {
				return // nobody behind is ours
			}
		}
		a.add(c)
	}
}

// oldestAhead returns the create revision of the oldest of gone ahead of
// rev, or 0 if none is.
func oldestAhead(gone []claim, rev int64) int64 {
	var oldest int64
	for _, c := range gone {
		if c.rev < rev && (oldest == 0 || c.rev < oldest) {
			oldest = c.rev
		}
	}
	return oldest
}
