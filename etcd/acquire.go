package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
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
	val := identityValue(req)
	// A slot whose key exists already holds an orphan of ours (a put
	// applied after its clean-up): it is deleted, and the next slot tried.
	for range 3 {
		k := d.slots.take(pfx, req.Name)
		var h backends.Hold
		var err error
		if req.Wait {
			h, err = d.enqueue(ctx, s, pfx, k, val, req.NoCancel)
		} else {
			h, err = d.tryAcquire(ctx, s, pfx, k, val)
		}
		if !errors.Is(err, errSlotTaken) {
			return h, err
		}
		d.deleteKey(k, 0)
	}
	return nil, fmt.Errorf("%w: etcd acquire: key slots under %s hold stale keys", backends.ErrUnavailable, pfx)
}

var errSlotTaken = errors.New("etcd key slot taken")

// enqueue puts our key at the tail of the queue and waits until it is the
// oldest. One round trip when uncontended: the put, and a count of the keys
// under the name, ours included.
func (d *driver) enqueue(ctx context.Context, s *session, pfx string, k slotKey, val string, noCancel bool) (backends.Hold, error) {
	resp, err := d.putTxn(ctx, "acquire", k, noCancel, func(tctx context.Context) (*clientv3.TxnResponse, error) {
		return d.cli.Txn(tctx).
			If(clientv3.Compare(clientv3.CreateRevision(k.key), "=", 0)).
			Then(clientv3.OpPut(k.key, val, clientv3.WithLease(s.id)), clientv3.OpGet(pfx, clientv3.WithPrefix(), clientv3.WithCountOnly())).
			Commit()
	})
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		return nil, errSlotTaken
	}
	h := &hold{s: s, k: k, rev: resp.Header.Revision} // the Txn's one write is our put
	if resp.Responses[1].GetResponseRange().Count == 1 {
		return h.acquired(), nil
	}
	w := &waiter{key: k.key, rev: h.rev, turn: make(chan error, 1)}
	q, err := d.join(k.name, pfx, w)
	if err == nil {
		err = q.wait(ctx, w, s)
	}
	if err == nil && !s.usable() {
		// Our key's lease was alive when the holder's key went, but its
		// last grant has run out since: nothing may rely on it.
		err = driverkit.Unavailable("etcd wait", errors.New("session lease lost while waiting"))
	}
	if err != nil {
		d.deleteKey(k, h.rev)
		return nil, err
	}
	return h.acquired(), nil
}

// tryAcquire puts the key only if nobody holds or waits for the name, in one
// round trip, so a failed attempt leaves nothing to clean up.
func (d *driver) tryAcquire(ctx context.Context, s *session, pfx string, k slotKey, val string) (backends.Hold, error) {
	resp, err := d.putTxn(ctx, "try-acquire", k, false, func(tctx context.Context) (*clientv3.TxnResponse, error) {
		return d.cli.Txn(tctx).
			If(clientv3.Compare(clientv3.CreateRevision(pfx).WithPrefix(), "=", 0)).
			Then(clientv3.OpPut(k.key, val, clientv3.WithLease(s.id))).
			Else(clientv3.OpGet(k.key, clientv3.WithCountOnly())).
			Commit()
	})
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		if resp.Responses[0].GetResponseRange().Count > 0 {
			return nil, errSlotTaken
		}
		d.slots.free(k)
		return nil, backends.ErrNotAcquired
	}
	return (&hold{s: s, k: k, rev: resp.Header.Revision}).acquired(), nil
}

// putTxn runs a Txn that puts key. The Txn is detached from ctx (but not
// from the driver's Close, nor from the request bound), so its outcome is
// known before any cleanup: a cancelled put whose fate is unknown could
// otherwise be applied after the delete meant to clean it up, leaving an
// orphan key that the shared session lease keeps alive. If ctx ends first,
// putTxn returns at once and the janitor waits for the outcome and then
// deletes the key. A failed Txn deletes it too (it may have been applied).
//
// With noCancel (ctx ends only at Close) the Txn runs inline: bounded by
// the request timeout and the driver's Close, its outcome is known when it
// returns, and no goroutine is started.
func (d *driver) putTxn(ctx context.Context, what string, k slotKey, noCancel bool, txn func(context.Context) (*clientv3.TxnResponse, error)) (*clientv3.TxnResponse, error) {
	if noCancel {
		tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		stop := context.AfterFunc(d.ctx, cancel)
		defer stop()
		var resp *clientv3.TxnResponse
		err := d.call(tctx, what, func(ctx context.Context) (err error) {
			resp, err = txn(ctx)
			return err
		})
		d.failed(k, err)
		return resp, err
	}
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
		d.failed(k, r.err)
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
			return d.delete(jctx, k, 0)
		})
		if waited := time.Since(sent); waited > slowRequest {
			// The server sat on the request: an outage, not contention.
			return nil, driverkit.Unavailable("etcd "+what, fmt.Errorf("no answer in %v: %w", waited.Round(time.Millisecond), ctx.Err()))
		}
		return nil, ctx.Err()
	}
}

// failed cleans up after a put that failed with err, if it did: a put the
// server refused (access denied) was not applied, and frees its slot; any
// other failure may have been applied, and deletes the key.
func (d *driver) failed(k slotKey, err error) {
	switch {
	case err == nil:
	case errors.Is(err, backends.ErrAccessDenied):
		d.slots.free(k)
	default:
		d.deleteKey(k, 0)
	}
}

// slowRequest is how long a request may take before a caller's deadline
// that ends it is blamed on the server rather than on the wait.
const slowRequest = time.Second
