package etcd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
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
	ident := identityValue(req)
	val := claimHeader(req) + ident
	// A slot whose key exists already holds an orphan of ours (a put
	// applied after its clean-up): it is deleted, and the next slot tried.
	for range 3 {
		k := d.slots.take(pfx, req.Name)
		var h backends.Hold
		var err error
		switch {
		case req.Wait:
			h, err = d.enqueue(ctx, s, pfx, k, val, req)
		case isMutex(req):
			h, err = d.tryAcquire(ctx, s, pfx, k, val, req)
		default:
			h, err = d.tryShare(ctx, s, pfx, k, val, req)
		}
		if !errors.Is(err, errSlotTaken) {
			if h, ok := h.(*hold); ok {
				h.ident, h.mode, h.limit, h.elect = ident, req.Mode, max(req.Limit, 1), req.Elect
			}
			return h, err
		}
		d.deleteKey(k, 0)
	}
	return nil, fmt.Errorf("%w: etcd acquire: key slots under %s hold stale keys", backends.ErrUnavailable, pfx)
}

var errSlotTaken = errors.New("etcd key slot taken")

// enqueue puts our key at the tail of the queue and waits until the keys
// ahead of it admit it. One round trip when uncontended: the put, and a
// read of the keys under the name, ours included: for a mutex only their
// count (alone, it holds the lock; else it waits), for a reader or a
// permit every key, to apply the rule to the keys ahead at once.
func (d *driver) enqueue(ctx context.Context, s *session, pfx string, k slotKey, val string, req backends.Request) (backends.Hold, error) {
	mutex := isMutex(req)
	resp, err := d.putTxn(ctx, s, "acquire", req.NoCancel, func(tctx context.Context) (*clientv3.TxnResponse, error) {
		return d.cli.Txn(tctx).
			If(clientv3.Compare(clientv3.CreateRevision(k.key), "=", 0)).
			Then(clientv3.OpPut(k.key, val, clientv3.WithLease(s.id)), queueRead(pfx, mutex)).
			Commit()
	}, k)
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		return nil, errSlotTaken
	}
	h := &hold{s: s, k: k, rev: resp.Header.Revision} // the Txn's one write is our put
	rng := resp.Responses[1].GetResponseRange()
	if mutex {
		if rng.Count == 1 {
			return h.acquired(), nil
		}
	} else {
		switch ok, err := lineAhead(rng.Kvs, h.rev).admit(req.Name, requestClaim(k.key, h.rev, req)); {
		case err != nil:
			d.deleteKey(k, h.rev)
			return nil, err
		case ok:
			return h.acquired(), nil
		}
	}
	w := &waiter{claim: requestClaim(k.key, h.rev, req), turn: make(chan error, 1)}
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
	h.follows = w.follows
	return h.acquired(), nil
}

// queueRead is the read in enqueue's Txn: the count of the keys under pfx
// for a mutex, every key with its value for a reader or a permit.
func queueRead(pfx string, count bool) clientv3.Op {
	if count {
		return clientv3.OpGet(pfx, clientv3.WithPrefix(), clientv3.WithCountOnly())
	}
	return clientv3.OpGet(pfx, clientv3.WithPrefix())
}

// requestClaim is the claim of req's key.
func requestClaim(key string, rev int64, req backends.Request) claim {
	return claim{key: key, rev: rev, mode: req.Mode, limit: max(req.Limit, 1)}
}

// lineAhead sums up the keys among kvs created before rev.
func lineAhead(kvs []*mvccpb.KeyValue, rev int64) ahead {
	var a ahead
	for _, kv := range kvs {
		if kv.CreateRevision < rev {
			a.add(parseClaim(string(kv.Key), kv.CreateRevision, kv.Value))
		}
	}
	return a
}

// tryAcquire puts a mutex's key only if nobody holds or waits for the
// name, in one round trip, so a failed attempt leaves nothing to clean up.
// A failed attempt reads the name's keys to tell a held name from one
// held or awaited with another limit.
func (d *driver) tryAcquire(ctx context.Context, s *session, pfx string, k slotKey, val string, req backends.Request) (backends.Hold, error) {
	resp, err := d.putTxn(ctx, s, "try-acquire", false, func(tctx context.Context) (*clientv3.TxnResponse, error) {
		return d.cli.Txn(tctx).
			If(clientv3.Compare(clientv3.CreateRevision(pfx).WithPrefix(), "=", 0)).
			Then(clientv3.OpPut(k.key, val, clientv3.WithLease(s.id))).
			Else(clientv3.OpGet(pfx, clientv3.WithPrefix())).
			Commit()
	}, k)
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		for _, kv := range kvs {
			if string(kv.Key) == k.key {
				return nil, errSlotTaken
			}
		}
		d.slots.free(k)
		if _, err := lineAhead(kvs, math.MaxInt64).admit(req.Name, requestClaim(k.key, 0, req)); err != nil {
			return nil, err
		}
		return nil, backends.ErrNotAcquired
	}
	return (&hold{s: s, k: k, rev: resp.Header.Revision}).acquired(), nil
}

// tryShare is tryAcquire for a reader or a permit, which may hold the
// name beside others: it puts its key and reads the keys ahead in one
// round trip, and deletes its key again if they do not admit it (a
// second round trip, and a key that others may see for that long: it
// came after theirs, so it only makes the keys behind it wait).
func (d *driver) tryShare(ctx context.Context, s *session, pfx string, k slotKey, val string, req backends.Request) (backends.Hold, error) {
	resp, err := d.putTxn(ctx, s, "try-acquire", false, func(tctx context.Context) (*clientv3.TxnResponse, error) {
		return d.cli.Txn(tctx).
			If(clientv3.Compare(clientv3.CreateRevision(k.key), "=", 0)).
			Then(clientv3.OpPut(k.key, val, clientv3.WithLease(s.id)), clientv3.OpGet(pfx, clientv3.WithPrefix())).
			Commit()
	}, k)
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		return nil, errSlotTaken
	}
	h := &hold{s: s, k: k, rev: resp.Header.Revision}
	ok, err := lineAhead(resp.Responses[1].GetResponseRange().Kvs, h.rev).admit(req.Name, requestClaim(k.key, h.rev, req))
	if ok {
		return h.acquired(), nil
	}
	d.deleteKey(k, h.rev)
	if err == nil {
		err = backends.ErrNotAcquired
	}
	return nil, err
}

// putTxn runs a Txn that puts the keys ks. The Txn is detached from ctx (but not
// from the driver's Close, nor from the request bound), so its outcome is
// known before any cleanup: a cancelled put whose fate is unknown could
// otherwise be applied after the delete meant to clean it up, leaving an
// orphan key that the shared session lease keeps alive. If ctx ends first,
// putTxn returns at once and the janitor waits for the outcome and then
// deletes the keys. A failed Txn deletes them too (it may have been applied).
//
// With noCancel (ctx ends only at Close) the Txn runs inline: bounded by
// the request timeout and the driver's Close, its outcome is known when it
// returns, and no goroutine is started.
func (d *driver) putTxn(ctx context.Context, s *session, what string, noCancel bool, txn func(context.Context) (*clientv3.TxnResponse, error), ks ...slotKey) (*clientv3.TxnResponse, error) {
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
		d.failed(s, ks, err)
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
		d.failed(s, ks, r.err)
		return r.resp, r.err
	case <-ctx.Done():
		settled := false
		keys := slices.Clone(ks) // kept by the janitor; ks itself stays on the stack
		d.janitor.Settle(func(jctx context.Context) error {
			if !settled {
				select {
				case r := <-res:
					settled = true
					if unknownOutcome(r.err) {
						for _, k := range keys {
							s.suspect(k)
						}
					}
				case <-jctx.Done():
					return jctx.Err()
				}
			}
			// A key deleted has its slot freed, maybe reused by now: a
			// retry deletes only those that are left.
			var errs []error
			keys = slices.DeleteFunc(keys, func(k slotKey) bool {
				err := d.delete(jctx, k, 0)
				errs = append(errs, err)
				return err == nil || errors.Is(err, backends.ErrAccessDenied) // slot freed (delete)
			})
			return errors.Join(errs...)
		})
		if waited := time.Since(sent); waited > slowRequest {
			// The server sat on the request: an outage, not contention.
			return nil, driverkit.Unavailable("etcd "+what, fmt.Errorf("no answer in %v: %w", waited.Round(time.Millisecond), ctx.Err()))
		}
		return nil, ctx.Err()
	}
}

// failed cleans up after a put of ks on s that failed with err, if it did:
// a put the server refused (access denied) was not applied, and frees its
// slots; any other failure may have been applied, or may be yet (a
// suspect: orphans.go), and deletes the keys.
//
// The deletes run side by side: the caller waits for their first attempts
// at most driverkit.CleanupWait in all, not once per key (a LockAll's
// names in an outage).
func (d *driver) failed(s *session, ks []slotKey, err error) {
	switch {
	case err == nil:
	case !unknownOutcome(err):
		for _, k := range ks {
			d.slots.free(k)
		}
	default:
		deletes := make([]func(context.Context) error, len(ks))
		for i, k := range ks {
			s.suspect(k)
			deletes[i] = func(ctx context.Context) error { return d.delete(ctx, k, 0) }
		}
		d.janitor.SettleAll(deletes...)
	}
}

// slowRequest is how long a request may take before a caller's deadline
// that ends it is blamed on the server rather than on the wait.
const slowRequest = time.Second
