package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// identityValue is the value of an acquisition's key: who made it, for
// Holders.
func identityValue(req backends.Request) string {
	b, _ := json.Marshal(driverkit.IdentityOf(req))
	return string(b)
}

// Holders lists the oldest key of every name under prefix: its holder.
func (d *driver) Holders(ctx context.Context, prefix string) ([]backends.Holder, error) {
	root := d.prefix + "/"
	var resp *clientv3.GetResponse
	err := d.call(ctx, "list holders", func(ctx context.Context) (err error) {
		// Names are escaped character by character, so the escaped
		// prefix is a prefix of exactly the escaped names it begins.
		resp, err = d.cli.Get(ctx, root+driverkit.EscapeName(prefix, "/"), clientv3.WithPrefix())
		return err
	})
	if err != nil {
		return nil, err
	}
	type queue struct {
		head *mvccpb.KeyValue
		n    int
	}
	queues := map[string]*queue{}
	for _, kv := range resp.Kvs {
		rest := strings.TrimPrefix(string(kv.Key), root)
		i := strings.LastIndexByte(rest, '/')
		if i < 0 || strings.HasPrefix(rest, forcedDir) {
			continue // not a queue key of ours
		}
		name, err := url.PathUnescape(rest[:i])
		if err != nil || !strings.HasPrefix(name, prefix) {
			continue
		}
		q := queues[name]
		if q == nil {
			q = &queue{}
			queues[name] = q
		}
		q.n++
		if q.head == nil || kv.CreateRevision < q.head.CreateRevision {
			q.head = kv
		}
	}
	out := make([]backends.Holder, 0, len(queues))
	for name, q := range queues {
		h := d.holder(ctx, name, q.head)
		h.Waiters = q.n - 1
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b backends.Holder) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// holder describes the holder of name, whose key is kv.
func (d *driver) holder(ctx context.Context, name string, kv *mvccpb.KeyValue) backends.Holder {
	var id backends.Identity
	_ = json.Unmarshal(kv.Value, &id) // keys of older versions carry no identity
	h := backends.Holder{Name: name, Token: uint64(kv.CreateRevision), ID: string(kv.Key),
		Host: id.Host, PID: id.PID, Owner: id.Owner}
	if id.At > 0 {
		h.Since = time.UnixMilli(id.At)
	}
	if kv.Lease != 0 {
		var ttl *clientv3.LeaseTimeToLiveResponse
		err := d.call(ctx, "lease time to live", func(ctx context.Context) (err error) {
			ttl, err = d.cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
			return err
		})
		if err == nil && ttl.TTL >= 0 {
			h.Expires = time.Now().Add(time.Duration(ttl.TTL) * time.Second)
		}
	}
	return h
}

// ForceRelease deletes the oldest key of name, guarded by its create
// revision, and records the release (forcedOp) in the same transaction.
// Its holder learns at its next renewal, which checks that its key still
// exists.
func (d *driver) ForceRelease(ctx context.Context, name string) (backends.Holder, error) {
	pfx := d.queuePrefix(name)
	var resp *clientv3.TxnResponse
	err := d.call(ctx, "read holder", func(ctx context.Context) (err error) {
		resp, err = d.cli.Txn(ctx).Then(
			clientv3.OpGet(pfx, clientv3.WithFirstCreate()...),
			clientv3.OpGet(pfx, clientv3.WithPrefix(), clientv3.WithCountOnly()),
		).Commit()
		return err
	})
	if err != nil {
		return backends.Holder{}, err
	}
	head := resp.Responses[0].GetResponseRange().Kvs
	if len(head) == 0 {
		return backends.Holder{}, fmt.Errorf("%w: nobody holds %q", backends.ErrNotHeld, name)
	}
	kv := head[0]
	h := d.holder(ctx, name, kv)
	h.Waiters = int(resp.Responses[1].GetResponseRange().Count) - 1
	record, lease, err := d.forcedOp(ctx, h)
	if err != nil {
		return backends.Holder{}, err
	}
	var del *clientv3.TxnResponse
	err = d.call(ctx, "force release", func(ctx context.Context) (err error) {
		// The record in the same transaction: whoever sees the key gone
		// can see why.
		del, err = d.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(string(kv.Key)), "=", kv.CreateRevision)).
			Then(clientv3.OpDelete(string(kv.Key)), record).Commit()
		return err
	})
	if err == nil && !del.Succeeded {
		err = fmt.Errorf("%w: %q changed hands meanwhile (token %d released)", backends.ErrNotHeld, name, kv.CreateRevision)
	}
	if err != nil {
		_ = d.call(ctx, "revoke record lease", func(ctx context.Context) error {
			_, err := d.cli.Revoke(ctx, lease)
			return err
		})
		return backends.Holder{}, err
	}
	return h, nil
}

// lostKeys returns the holds among hs whose key no longer exists as they
// created it (force-released, or gone with the lease): a renewal must
// report them not held even while the session's lease lives.
func (d *driver) lostKeys(ctx context.Context, hs []*hold) (map[*hold]bool, error) {
	lost := map[*hold]bool{}
	for chunk := range slices.Chunk(hs, 128) { // etcd's default limit of operations per Txn
		ops := make([]clientv3.Op, len(chunk))
		for i, h := range chunk {
			ops[i] = clientv3.OpGet(h.k.key, clientv3.WithKeysOnly())
		}
		var resp *clientv3.TxnResponse
		err := d.call(ctx, "check holds", func(ctx context.Context) (err error) {
			resp, err = d.cli.Txn(ctx).Then(ops...).Commit()
			return err
		})
		if err != nil {
			return nil, err
		}
		for i, h := range chunk {
			kvs := resp.Responses[i].GetResponseRange().Kvs
			if len(kvs) == 0 || kvs[0].CreateRevision != h.rev {
				lost[h] = true
			}
		}
	}
	return lost, nil
}
