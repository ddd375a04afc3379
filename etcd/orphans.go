package etcd

import (
	"context"
	"errors"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/padlock-go/padlock/backends"
)

// Orphans. A put whose outcome is unknown (its request failed: timed out,
// connection lost) is cleaned up by a delete that reads the key first
// (deleteKey). If the put's proposal is applied only after that read found
// nothing (a proposal delayed across a leader change or a partition), its
// key appears afterwards, bound to the session's lease, which the Locker's
// other holds keep alive: to every other client the name looks held, for as
// long as the Locker lives. (The driver itself would find the key in its
// slot at its next acquisition there, and delete it: acquire.)
//
// So the put's key becomes a suspect of its session. A session with
// suspects takes no new user (the next acquisition grants a new lease),
// reads its suspects after every keep-alive, and deletes any that exists
// on its lease while its slot is free (no acquisition of ours uses it),
// guarded by the create revision it read. Once its last user is gone, it
// is revoked, which deletes what it may still keep and leaves a put still
// on its way no lease to attach to. An orphan lives at most one keep-alive
// period (a third of the TTL) and a read.

// suspect records that a put of k on s had an unknown outcome.
func (s *session) suspect(k slotKey) {
	s.mu.Lock()
	if s.suspects == nil {
		s.suspects = map[string]slotKey{}
	}
	s.suspects[k.key] = k
	s.mu.Unlock()
	s.poke() // an idle session is revoked at once (keep)
}

// unknownOutcome reports whether a put that failed with err may still have
// been applied: any failure but the server's refusal.
func unknownOutcome(err error) bool {
	return err != nil && !errors.Is(err, backends.ErrAccessDenied)
}

// maxOrphanReads bounds the reads in one Txn (etcd's --max-txn-ops is 128
// by default).
const maxOrphanReads = 64

// lookForOrphans starts one look for the session's suspects in the
// background, unless one is under way or there are none.
func (s *session) lookForOrphans() {
	s.mu.Lock()
	if len(s.suspects) == 0 || s.checking || s.dead {
		s.mu.Unlock()
		return
	}
	s.checking = true
	ks := make([]slotKey, 0, len(s.suspects))
	for _, k := range s.suspects {
		ks = append(ks, k)
	}
	s.mu.Unlock()
	s.d.bg.Go(func() {
		defer func() {
			s.mu.Lock()
			s.checking = false
			s.mu.Unlock()
		}()
		for len(ks) > 0 {
			n := min(len(ks), maxOrphanReads)
			if err := s.deleteOrphans(s.d.ctx, ks[:n]); err != nil {
				return // the next keep-alive tries again
			}
			ks = ks[n:]
		}
	})
}

// deleteOrphans reads ks and deletes those that exist on the session's lease
// while their slot is free. A slot is freed only once its key is surely
// gone, and a key is re-created only by an acquisition that took its slot
// first, so a key read while its slot is free is an orphan; the delete is
// guarded by the create revision read, so it can never take the key of an
// acquisition that takes the slot afterwards.
func (s *session) deleteOrphans(ctx context.Context, ks []slotKey) error {
	d := s.d
	gets := make([]clientv3.Op, len(ks))
	for i, k := range ks {
		gets[i] = clientv3.OpGet(k.key) // not keys only: etcd 3.7 answers that from its index, without the lease
	}
	var resp *clientv3.TxnResponse
	err := d.call(ctx, "look for orphans", func(ctx context.Context) (err error) {
		resp, err = d.cli.Txn(ctx).Then(gets...).Commit()
		return err
	})
	if err != nil {
		return err
	}
	var errs []error
	for i, k := range ks {
		kvs := resp.Responses[i].GetResponseRange().Kvs
		if len(kvs) == 0 || clientv3.LeaseID(kvs[0].Lease) != s.id || !d.slots.isFree(k) {
			continue
		}
		rev := kvs[0].CreateRevision
		var deleted bool
		err := d.call(ctx, "delete orphan", func(ctx context.Context) error {
			resp, err := d.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k.key), "=", rev)).
				Then(clientv3.OpDelete(k.key)).Commit()
			deleted = err == nil && resp.Succeeded
			return err
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !deleted {
			continue // the key read went meanwhile: still a suspect
		}
		s.mu.Lock()
		delete(s.suspects, k.key) // a put is applied once: this one is settled
		s.mu.Unlock()
		d.log.Warn("padlock: etcd deleted an orphan key, put by an acquisition that had failed", "key", k.key, "lease", int64(s.id))
	}
	return errors.Join(errs...)
}
