package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/backends"
)

func (d *driver) Acquire(ctx context.Context, req backends.Request) (backends.Hold, error) {
	s, err := d.session(ctx, req.TTL)
	if err != nil {
		return nil, err
	}
	// This acquisition relies on the lease from here on; a hold it makes
	// takes the reliance over and ends it at its Release.
	h, err := d.acquire(ctx, s, req)
	if err != nil {
		s.done()
		return nil, err
	}
	return h, nil
}

func (d *driver) acquire(ctx context.Context, s *session, req backends.Request) (backends.Hold, error) {
	pfx := d.queuePrefix(req.Name)
	key := d.newKey(pfx, s.id)
	if !req.Wait {
		return d.tryAcquire(ctx, s, pfx, key)
	}

	// One round trip when uncontended: put our key, and read the two newest
	// keys (ours and our predecessor) and the oldest (the holder).
	resp, err := d.putTxn(ctx, "acquire", key, func(tctx context.Context) (*clientv3.TxnResponse, error) {
		return d.cli.Txn(tctx).Then(
			clientv3.OpPut(key, "", clientv3.WithLease(s.id)),
			clientv3.OpGet(pfx, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend),
				clientv3.WithLimit(2), clientv3.WithKeysOnly()),
			clientv3.OpGet(pfx, append(clientv3.WithFirstCreate(), clientv3.WithKeysOnly())...),
		).Commit()
	})
	if err != nil {
		return nil, err
	}
	newest := resp.Responses[1].GetResponseRange().Kvs
	head := resp.Responses[2].GetResponseRange().Kvs
	if len(newest) == 0 || string(newest[0].Key) != key {
		d.deleteKey(key)
		return nil, fmt.Errorf("%w: etcd acquire: own key missing after put", backends.ErrUnavailable)
	}
	myRev := newest[0].CreateRevision
	h := &hold{s: s, key: key, rev: myRev}
	if len(newest) == 1 {
		return h.acquired(), nil
	}
	w := waiter{d: d, s: s, pfx: pfx, key: key, rev: myRev,
		pred: string(newest[1].Key), predIsHead: len(head) == 1 && string(head[0].Key) == string(newest[1].Key),
		watchRev: resp.Header.Revision + 1}
	if err := w.wait(ctx); err != nil {
		d.deleteKey(key)
		return nil, err
	}
	return h.acquired(), nil
}

// tryAcquire puts the key only if nobody holds or waits for the name, in one
// round trip, so a failed attempt leaves nothing to clean up.
func (d *driver) tryAcquire(ctx context.Context, s *session, pfx, key string) (backends.Hold, error) {
	resp, err := d.putTxn(ctx, "try-acquire", key, func(tctx context.Context) (*clientv3.TxnResponse, error) {
		return d.cli.Txn(tctx).
			If(clientv3.Compare(clientv3.CreateRevision(pfx).WithPrefix(), "=", 0)).
			Then(clientv3.OpPut(key, "", clientv3.WithLease(s.id))).
			Commit()
	})
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		return nil, backends.ErrNotAcquired
	}
	return (&hold{s: s, key: key, rev: resp.Header.Revision}).acquired(), nil
}

// putTxn runs a Txn that puts key. The Txn is detached from ctx (but not
// from the driver's Close, nor from the request bound), so its outcome is
// known before any cleanup: a cancelled put whose fate is unknown could
// otherwise be applied after the delete meant to clean it up, leaving an
// orphan key that the shared session lease keeps alive. If ctx ends first,
// putTxn returns at once and the janitor waits for the outcome and then
// deletes the key. A failed Txn deletes it too (it may have been applied).
func (d *driver) putTxn(ctx context.Context, what, key string, txn func(context.Context) (*clientv3.TxnResponse, error)) (*clientv3.TxnResponse, error) {
	type result struct {
		resp *clientv3.TxnResponse
		err  error
	}
	res := make(chan result, 1)
	sent := time.Now()
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(d.ctx, cancel)
	d.bg.Go(func() {
		defer stop()
		defer cancel()
		var r result
		r.err = d.call(tctx, what, func(ctx context.Context) (err error) {
			r.resp, err = txn(ctx)
			return err
		})
		res <- r
	})
	select {
	case r := <-res:
		if r.err != nil {
			d.deleteKey(key)
		}
		return r.resp, r.err
	case <-ctx.Done():
		settled := false
		d.janitor.Settle(func(jctx context.Context) error {
			if !settled {
				select {
				case <-res:
					settled = true
				case <-jctx.Done():
					return jctx.Err()
				}
			}
			return d.call(jctx, "delete", func(ctx context.Context) error {
				_, err := d.cli.Delete(ctx, key)
				return err
			})
		})
		if waited := time.Since(sent); waited > slowRequest {
			// The server sat on the request: an outage, not contention.
			return nil, backends.Unavailable("etcd "+what, fmt.Errorf("no answer in %v: %w", waited.Round(time.Millisecond), ctx.Err()))
		}
		return nil, ctx.Err()
	}
}

// slowRequest is how long a request may take before a caller's deadline
// that ends it is blamed on the server rather than on the wait.
const slowRequest = time.Second

// waiter waits for its turn: it watches only its predecessor, the key with
// the greatest create revision below its own, so a release wakes one waiter.
type waiter struct {
	d          *driver
	s          *session
	pfx, key   string
	rev        int64 // our key's create revision
	pred       string
	predIsHead bool  // the predecessor was the holder when we looked
	watchRev   int64 // the revision after our last read of the queue
}

func (w *waiter) wait(ctx context.Context) error {
	backoff := backends.ExponentialBackoff(20*time.Millisecond, time.Second)
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			// The last watch ended without news (a restart, a lost leader):
			// do not spin while the cluster recovers.
			t := time.NewTimer(backoff.NextBackoff(attempt))
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
		deleted, err := w.watchPredecessor(ctx)
		if err != nil {
			return err
		}
		// When the deleted predecessor was the holder, no older key can exist
		// (revisions only grow), and our key is alive because our lease is
		// (its renewals were acknowledged): skip the re-reads that
		// concurrency.Mutex does after every wake-up.
		if deleted && w.predIsHead && w.s.usable() {
			return nil
		}
		done, err := w.relist(ctx)
		if err != nil || done {
			return err
		}
		if deleted {
			attempt = -1 // progress: the queue moved
		}
	}
}

// watchPredecessor returns true when the predecessor is deleted, or false when
// the watch ended for another reason (compaction, lost leader, cancelled
// stream) and the queue must be read again. It fails if the session's lease
// is lost meanwhile, because our key lives on it.
//
// The watch starts at the current revision rather than at the revision of
// our last read: etcd serves a watch that starts in the past from a sync loop
// that runs every 100ms, which would add up to 100ms to every hand-off under
// load. The gap between our read and the watch's start is closed instead by
// checking that the predecessor still exists once the watch is in place.
func (w *waiter) watchPredecessor(ctx context.Context) (bool, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	// Creating a watch blocks until the client has a stream to a server:
	// a lost lease must end that wait too.
	stop := context.AfterFunc(w.s.lost, cancel)
	defer stop()
	wch := w.d.cli.Watch(wctx, w.pred, clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
	for {
		// The session's keeper keeps our key's lease alive while we wait;
		// if the lease is lost, our key is (or soon will be) gone.
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-w.s.lost.Done():
			return false, backends.Unavailable("etcd wait", errors.New("session lease lost while waiting"))
		case resp, ok := <-wch:
			if !ok || resp.Canceled || resp.Err() != nil {
				if ctx.Err() != nil {
					return false, ctx.Err()
				}
				return false, nil
			}
			if resp.Created && resp.Header.Revision >= w.watchRev {
				// Something was written since our read: the predecessor
				// may be gone already, before the watch began.
				var resp *clientv3.GetResponse
				err := w.d.call(ctx, "read predecessor", func(ctx context.Context) (err error) {
					resp, err = w.d.cli.Get(ctx, w.pred, clientv3.WithKeysOnly())
					return err
				})
				switch {
				case ctx.Err() != nil:
					return false, ctx.Err()
				case err != nil:
					return false, nil // unverified gap: re-read the queue
				case len(resp.Kvs) == 0:
					return true, nil
				}
			}
			for _, ev := range resp.Events {
				if ev.Type == mvccpb.DELETE {
					return true, nil
				}
			}
		}
	}
}

// relist reads the queue again: it returns true when we are now the oldest
// key, or finds the new predecessor to watch.
func (w *waiter) relist(ctx context.Context) (bool, error) {
	g := w.s.currentGrant()
	rctx, cancel := context.WithDeadline(ctx, g.Expiry().Add(-padlock.SafetyMargin(g.TTL)))
	defer cancel()
	var resp *clientv3.TxnResponse
	err := w.d.call(rctx, "read queue", func(ctx context.Context) (err error) {
		resp, err = w.d.cli.Txn(ctx).Then(
			clientv3.OpGet(w.key, clientv3.WithKeysOnly()),
			clientv3.OpGet(w.pfx, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(w.rev-1), clientv3.WithKeysOnly())...),
			clientv3.OpGet(w.pfx, append(clientv3.WithFirstCreate(), clientv3.WithKeysOnly())...),
		).Commit()
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if w.s.usable() {
			return false, nil // the session still holds: try again
		}
		return false, backends.Unavailable("etcd wait", fmt.Errorf("session lease lost while waiting: %w", err))
	}
	if len(resp.Responses[0].GetResponseRange().Kvs) == 0 {
		return false, fmt.Errorf("%w: etcd queue key vanished while waiting (session lease expired)", backends.ErrUnavailable)
	}
	preds := resp.Responses[1].GetResponseRange().Kvs
	if len(preds) == 0 {
		return true, nil
	}
	head := resp.Responses[2].GetResponseRange().Kvs
	w.pred = string(preds[0].Key)
	w.predIsHead = len(head) == 1 && string(head[0].Key) == w.pred
	w.watchRev = resp.Header.Revision + 1
	return false, nil
}
