package etcd

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/padlock-go/padlock/backends"
)

// A candidacy is a mutex's key whose value carries the candidate's value:
// "E<n>:" heads it, n the length in bytes of the value that follows, then
// the identity JSON. The value is written by the acquisition's own put, so
// the moment the key holds the name its value is there to read; Proclaim
// replaces it with a put guarded by the key's create revision. The length
// keeps any bytes a value may hold (a '{', invalid UTF-8) apart from the
// identity.

// candidacyHeader heads the value of a candidacy's key whose value is v.
func candidacyHeader(v string) string {
	return "E" + strconv.Itoa(len(v)) + ":" + v
}

// candidacy splits a key's value into a candidacy's value and its
// identity JSON; ok is false when the key is no candidacy.
func candidacy(kv []byte) (value, ident []byte, ok bool) {
	if len(kv) < 3 || kv[0] != 'E' {
		return nil, nil, false
	}
	colon := bytes.IndexByte(kv, ':')
	if colon < 0 {
		return nil, nil, false
	}
	n, err := strconv.Atoi(string(kv[1:colon]))
	if err != nil || n < 0 || n > len(kv)-colon-1 {
		return nil, nil, false
	}
	rest := kv[colon+1:]
	return rest[:n], rest[n:], true
}

// Leader reads the first key of name's queue by create revision, which
// holds the name if anyone does (the keys that hold a name are the first
// in line; a candidacy is a mutex, alone at the head), in one
// linearizable Range (etcd's default, served through the leader). A key
// lives exactly as long as its lease on the server: the lease's expiry
// deletes it, so a key read is a live claim. A head that is no candidacy
// (a plain Lock, a reader, a permit) is no leader.
func (d *driver) Leader(ctx context.Context, name string) (backends.Leader, bool, error) {
	var resp *clientv3.GetResponse
	err := d.call(ctx, "read leader", func(ctx context.Context) (err error) {
		resp, err = d.cli.Get(ctx, d.queuePrefix(name), clientv3.WithFirstCreate()...)
		return err
	})
	if err != nil {
		return backends.Leader{}, false, err
	}
	if len(resp.Kvs) == 0 {
		return backends.Leader{}, false, nil
	}
	kv := resp.Kvs[0]
	v, _, ok := candidacy(kv.Value)
	if !ok {
		return backends.Leader{}, false, nil
	}
	return backends.Leader{Value: string(v), Token: uint64(kv.CreateRevision)}, true, nil
}

// Proclaim puts the candidacy's new value into its key if the key is
// still the one it created (its create revision: once a key holds a name
// it holds it while it exists, since keys only join behind it), keeping
// the key's lease (WithIgnoreLease: the key stays bound to whatever lease
// it has, so renewal and expiry go on as before). A put keeps the create
// revision, so the term's token and the hold's Renew and Release are
// unchanged; the put's event tells every watcher of the name.
func (h *hold) Proclaim(ctx context.Context, value string) error {
	if !h.elect {
		return fmt.Errorf("%w: etcd proclaim: key %s is a lock's, not a candidacy's", backends.ErrInvalidOption, h.k.key)
	}
	var resp *clientv3.TxnResponse
	err := h.s.d.call(ctx, "proclaim", func(ctx context.Context) (err error) {
		resp, err = h.s.d.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(h.k.key), "=", h.rev)).
			Then(clientv3.OpPut(h.k.key, candidacyHeader(value)+h.ident, clientv3.WithIgnoreLease())).
			Commit()
		return err
	})
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: etcd key %s is gone (lease expired or force-released): no longer the leader", backends.ErrNotHeld, h.k.key)
	}
	return nil
}
