package etcd

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/padlock-go/padlock/backends"
)

// maxTxnNames is the most names AcquireAll takes in one Txn: etcd's
// default limit of operations per Txn (--max-txn-ops), which its
// comparisons and its puts each stay within. A larger set goes name by
// name.
const maxTxnNames = 128

// AcquireAll takes every name of reqs in one Txn, or none. The Txn puts
// each name's key under the session lease, as tryAcquire puts one, only if
// no key (holder or waiter) exists under any of the names: each key is
// then alone in its name's revision-ordered queue, so waiters line up
// behind it as behind a per-name hold, and the Txn's revision, the create
// revision of every key it put, is each hold's token (above every earlier
// hold's on the name: revisions only grow).
func (d *driver) AcquireAll(ctx context.Context, reqs []backends.Request) ([]backends.Hold, error) {
	if len(reqs) > maxTxnNames {
		return nil, fmt.Errorf("%w: etcd: LockAll of more than %d names in one Txn", backends.ErrUnsupported, maxTxnNames)
	}
	for _, req := range reqs[1:] {
		if req.TTL != reqs[0].TTL {
			return nil, fmt.Errorf("%w: etcd: LockAll in one Txn with several leases", backends.ErrUnsupported)
		}
	}
	s, err := d.session(ctx, reqs[0].TTL)
	if err != nil {
		return nil, err
	}
	// Every hold relies on the lease, as each per-name acquisition does;
	// each hold's Release ends its own reliance.
	s.useMore(len(reqs) - 1)
	hs, err := d.acquireAll(ctx, s, reqs)
	if err != nil {
		for range reqs {
			s.done()
		}
		return nil, err
	}
	return hs, nil
}

func (d *driver) acquireAll(ctx context.Context, s *session, reqs []backends.Request) ([]backends.Hold, error) {
	ks := make([]slotKey, len(reqs))
	idents := make([]string, len(reqs))
	cmps := make([]clientv3.Cmp, len(reqs))
	puts := make([]clientv3.Op, len(reqs))
	gets := make([]clientv3.Op, len(reqs))
	for i, req := range reqs {
		pfx := d.queuePrefix(req.Name)
		ks[i] = d.slots.take(pfx, req.Name)
		idents[i] = identityValue(req)
		cmps[i] = clientv3.Compare(clientv3.CreateRevision(pfx).WithPrefix(), "=", 0)
		puts[i] = clientv3.OpPut(ks[i].key, claimHeader(req)+idents[i], clientv3.WithLease(s.id))
		// On failure: is our own slot's key there, an orphan of an
		// earlier put applied after its clean-up?
		gets[i] = clientv3.OpGet(ks[i].key, clientv3.WithKeysOnly())
	}
	resp, err := d.putTxn(ctx, s, "acquire-all", false, func(tctx context.Context) (*clientv3.TxnResponse, error) {
		return d.cli.Txn(tctx).If(cmps...).Then(puts...).Else(gets...).Commit()
	}, ks...)
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		for i, k := range ks {
			if len(resp.Responses[i].GetResponseRange().Kvs) > 0 {
				d.deleteKey(k, 0) // frees the slot once the orphan is gone
			} else {
				d.slots.free(k)
			}
		}
		return nil, backends.ErrNotAcquired
	}
	out := make([]backends.Hold, len(reqs))
	for i, req := range reqs {
		h := (&hold{s: s, k: ks[i], rev: resp.Header.Revision}).acquired()
		h.ident, h.mode, h.limit, h.elect = idents[i], req.Mode, 1, false
		out[i] = h
	}
	return out, nil
}

// useMore registers n more users of a session the caller uses already.
func (s *session) useMore(n int) {
	s.mu.Lock()
	s.users += n
	s.mu.Unlock()
}
