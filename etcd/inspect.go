package etcd

import (
	"cmp"
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
	b := driverkit.MarshalIdentity(driverkit.IdentityOf(req))
	return string(b)
}

// Holders lists, for every name under prefix, the keys that hold it: the
// first in line that backends.Mode's rule admits (one writer, or readers,
// or permits), one entry each.
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
	queues := map[string][]*mvccpb.KeyValue{}
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
		queues[name] = append(queues[name], kv)
	}
	var out []backends.Holder
	ttls := leaseTTLs{}
	for name, kvs := range queues {
		out = append(out, d.holders(ctx, name, kvs, ttls)...)
	}
	slices.SortFunc(out, func(a, b backends.Holder) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(a.Token, b.Token))
	})
	return out, nil
}

// holders describes the holders of name among its keys kvs, in line
// order; each one's Waiters counts the keys that are not holders.
func (d *driver) holders(ctx context.Context, name string, kvs []*mvccpb.KeyValue, ttls leaseTTLs) []backends.Holder {
	slices.SortFunc(kvs, func(a, b *mvccpb.KeyValue) int { return cmp.Compare(a.CreateRevision, b.CreateRevision) })
	var (
		a   ahead
		out []backends.Holder
	)
	for _, kv := range kvs {
		c := parseClaim(string(kv.Key), kv.CreateRevision, kv.Value)
		if ok, err := a.admit(name, c); ok && err == nil {
			out = append(out, d.holder(ctx, name, kv, c, ttls))
		}
		a.add(c)
	}
	for i := range out {
		out[i].Waiters = len(kvs) - len(out)
	}
	return out
}

// leaseTTLs caches the expiry of each lease for one listing: the keys of
// one client's holds share its lease.
type leaseTTLs map[int64]time.Time

// holder describes the hold of name whose key is kv, claiming c.
func (d *driver) holder(ctx context.Context, name string, kv *mvccpb.KeyValue, c claim, ttls leaseTTLs) backends.Holder {
	var id backends.Identity
	_ = json.Unmarshal(identityOf(kv.Value), &id) // keys of older versions carry no identity
	h := backends.Holder{Name: name, Token: uint64(kv.CreateRevision), ID: string(kv.Key),
		Host: id.Host, PID: id.PID, Owner: id.Owner, Mode: c.mode, Limit: c.limit}
	if v, _, ok := candidacy(kv.Value); ok {
		h.Elect, h.Value = true, string(v)
	}
	if id.At > 0 {
		h.Since = time.UnixMilli(id.At)
	}
	if kv.Lease == 0 {
		return h
	}
	if exp, ok := ttls[kv.Lease]; ok {
		h.Expires = exp
		return h
	}
	var ttl *clientv3.LeaseTimeToLiveResponse
	asked := time.Now() // the TTL left is whole seconds, rounded down, at a moment after this
	err := d.call(ctx, "lease time to live", func(ctx context.Context) (err error) {
		ttl, err = d.cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
		return err
	})
	switch {
	case err != nil:
	case ttl.TTL >= 0:
		h.Expires = asked.Add(time.Duration(ttl.TTL) * time.Second)
		ttls[kv.Lease] = h.Expires
	default:
		// -1: the lease ran out more than a second ago and its revocation,
		// which deletes the key, has not been applied yet (a loaded
		// server), or it is gone already: the hold has lapsed.
		h.Expires = asked
		ttls[kv.Lease] = h.Expires
	}
	return h
}

// ForceRelease deletes the keys that hold name (a writer, or every reader
// or permit), each guarded by its create revision, and records each
// release (forcedOps) in the same transaction. Their holders learn at
// their next renewal, which checks that their keys still exist.
func (d *driver) ForceRelease(ctx context.Context, name string) (backends.Holder, error) {
	var resp *clientv3.GetResponse
	err := d.call(ctx, "read holders", func(ctx context.Context) (err error) {
		resp, err = d.cli.Get(ctx, d.queuePrefix(name), clientv3.WithPrefix())
		return err
	})
	if err != nil {
		return backends.Holder{}, err
	}
	hs := d.holders(ctx, name, resp.Kvs, leaseTTLs{})
	if len(hs) == 0 {
		return backends.Holder{}, fmt.Errorf("%w: nobody holds %q", backends.ErrNotHeld, name)
	}
	records, lease, err := d.forcedOps(ctx, hs)
	if err != nil {
		return backends.Holder{}, err
	}
	// The records in the same transaction: whoever sees a key gone can
	// see why. etcd bounds a transaction's operations (128 by default),
	// so a name with many readers takes a transaction per chunk of them;
	// a chunk some of whose holds left meanwhile goes one by one.
	var removed []backends.Holder
	for i := 0; i < len(hs) && err == nil; i += forceChunk {
		part := hs[i:min(i+forceChunk, len(hs))]
		var ok bool
		ok, err = d.force(ctx, part, records[i:i+len(part)])
		if ok {
			removed = append(removed, part...)
			continue
		}
		for j := 0; j < len(part) && err == nil && len(part) > 1; j++ {
			if ok, err = d.force(ctx, part[j:j+1], records[i+j:i+j+1]); ok {
				removed = append(removed, part[j])
			}
		}
	}
	if len(removed) == 0 {
		if err != nil {
			// A transaction with an unknown outcome may have removed
			// holds and written their records: the lease is left to
			// expire with the records' retention, not revoked.
			return backends.Holder{}, err
		}
		_ = d.call(ctx, "revoke record lease", func(ctx context.Context) error {
			_, err := d.cli.Revoke(ctx, lease)
			return err
		})
		return backends.Holder{}, fmt.Errorf("%w: %q changed hands meanwhile (token %d released)", backends.ErrNotHeld, name, hs[0].Token)
	}
	if err != nil {
		return backends.Holder{}, fmt.Errorf("etcd: force-released %d of the %d holds of %q: %w", len(removed), len(hs), name, err)
	}
	return removed[0], nil
}

// forceChunk is how many holds one force-release transaction removes: two
// operations each, under etcd's default bound of 128.
const forceChunk = 60

// force deletes the keys of hs, with their records, if every one is still
// the key its holder created; it reports whether it did.
func (d *driver) force(ctx context.Context, hs []backends.Holder, records []clientv3.Op) (bool, error) {
	cmps := make([]clientv3.Cmp, 0, len(hs))
	ops := make([]clientv3.Op, 0, 2*len(hs))
	for i, h := range hs {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(h.ID), "=", int64(h.Token)))
		ops = append(ops, clientv3.OpDelete(h.ID), records[i])
	}
	var resp *clientv3.TxnResponse
	err := d.call(ctx, "force release", func(ctx context.Context) (err error) {
		resp, err = d.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		return err
	})
	return err == nil && resp.Succeeded, err
}

// txnOps is etcd's default limit of operations per Txn (--max-txn-ops).
const txnOps = 128

// lostKeys returns the holds among hs whose key no longer exists as they
// created it (force-released, or gone with the lease): a renewal must
// report them not held even while the session's lease lives. Up to txnOps
// holds are read in one Txn, key by key, each checked against the create
// revision it had. More holds of one session ask the lease for its keys
// instead (lostFromLease): one request however many there are, where a
// Txn per 128 holds made a renewal of 15,000 holds outlast a 3s lease on a
// loaded machine (the next keep-alive waits for it).
func (d *driver) lostKeys(ctx context.Context, hs []*hold) (map[*hold]bool, error) {
	if len(hs) > txnOps && !slices.ContainsFunc(hs, func(h *hold) bool { return h.s != hs[0].s }) {
		lost, err := d.lostFromLease(ctx, hs[0].s, len(hs), func(i int) *hold { return hs[i] })
		if err != nil {
			return nil, err
		}
		out := make(map[*hold]bool, len(lost))
		for _, i := range lost {
			out[hs[i]] = true
		}
		return out, nil
	}
	lost := map[*hold]bool{}
	for chunk := range slices.Chunk(hs, txnOps) {
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

// lostFromLease is lostKeys for holds of session s, from the keys its
// lease has attached: a hold whose key is not among them is lost. It does
// not compare create revisions: a key of this session is put again only
// for a later hold of the same slot, which is free only once the hold
// that had it was released, so a live hold's key on the lease is its own.
// The keys are looked up in the session's index of its holds (track),
// each hold found marked with this call's number: nothing is built per
// call, however many holds there are. The n holds checked are hold(0) to
// hold(n-1); it returns the indices of those lost.
func (d *driver) lostFromLease(ctx context.Context, s *session, n int, hold func(int) *hold) ([]int, error) {
	var resp *clientv3.LeaseTimeToLiveResponse
	err := d.call(ctx, "check holds", func(ctx context.Context) (err error) {
		resp, err = d.cli.TimeToLive(ctx, s.id, clientv3.WithAttachedKeys())
		return err
	})
	if err != nil {
		return nil, err
	}
	// Marking and reading the marks under one lock: two checks of the
	// session at once never see each other's marks.
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	s.checks++
	for _, k := range resp.Keys {
		if h := s.held[string(k)]; h != nil {
			h.seen = s.checks
		}
	}
	var lost []int
	for i := range n {
		if hold(i).seen != s.checks {
			lost = append(lost, i)
		}
	}
	return lost, nil
}
