package etcd

import (
	"context"
	"fmt"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/padlock-go/padlock/backends"
)

// hold is one acquisition: our queue key while it is the oldest. It relies
// on its session's lease from acquisition until its Release settles.
type hold struct {
	s        *session
	k        slotKey
	rev      int64          // create revision of our key: the fencing token
	ident    string         // the identity JSON in our key's value
	mode     backends.Mode  // as acquired, or Shared once Share succeeded
	limit    int            // as acquired
	elect    bool           // a candidacy (Request.Elect): Proclaim may replace its value
	grant    backends.Grant // at acquisition
	last     backends.Grant // the latest grant Renew returned
	released sync.Once      // ends the reliance on the lease
	seen     uint64         // the last lostFromLease call that found our key (under s.heldMu)
	follows  int64          // the token of the key it directly followed, 0 if unknown
}

// acquired completes a new hold: its grant, and its place in the
// session's index of live holds.
func (h *hold) acquired() *hold {
	h.grant = h.s.currentGrant()
	h.last = h.grant
	h.s.track(h)
	return h
}

func (h *hold) Token() uint64 { return uint64(h.rev) }

// Follows implements backends.Successor: a waiter admitted on the delete
// of the keys ahead of it followed the oldest of them, the one that held.
func (h *hold) Follows() (uint64, bool) { return uint64(h.follows), h.follows > 0 }
func (h *hold) Grant() backends.Grant   { return h.grant }

// Renew returns the keeper's next grant, one acknowledged after the last
// one this hold had.
func (h *hold) Renew(ctx context.Context) (backends.Grant, error) {
	g, err := h.s.renew(ctx, h.last)
	if err != nil {
		return g, err
	}
	lost, err := h.s.d.lostKeys(ctx, []*hold{h})
	switch {
	case err != nil:
		return backends.Grant{}, err
	case lost[h]:
		return backends.Grant{}, h.gone()
	}
	h.last = g
	return g, nil
}

// gone is the error of a renewal that found its key deleted while its
// lease lives: an operator's force release.
func (h *hold) gone() error {
	return fmt.Errorf("%w: etcd key %s was deleted (force-released)", backends.ErrNotHeld, h.k.key)
}

// Release deletes our key only if it is still the one we created: a stale
// retry must never delete a newer hold that reused the name (etcd #22082).
func (h *hold) Release(ctx context.Context) error {
	var resp *clientv3.TxnResponse
	err := h.s.d.call(ctx, "release", func(ctx context.Context) (err error) {
		resp, err = h.s.d.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(h.k.key), "=", h.rev)).
			Then(clientv3.OpDelete(h.k.key)).
			Commit()
		return err
	})
	if err != nil {
		return err // retried by the caller; the hold still relies on the lease
	}
	h.released.Do(func() {
		h.s.untrack(h)
		h.s.done()
		// Deleted, or gone with its lease: nothing re-creates it but us.
		h.s.d.slots.free(h.k)
	})
	if !resp.Succeeded {
		return fmt.Errorf("%w: etcd key %s is gone (lease expired)", backends.ErrNotHeld, h.k.key)
	}
	return nil
}

// Share turns a writer into a reader: one Txn puts the reader's value
// into our key if it is still the one we created, under the same lease.
// A put keeps a key's create revision, so the hold keeps its place in
// line and its token; the put's event tells every client waiting on the
// name, and the readers behind us whose only obstacle we were may enter.
// Renew and Release look at the key's create revision only, so they work
// whether a Share whose answer was lost was applied or not.
func (h *hold) Share(ctx context.Context) (backends.Grant, error) {
	if h.mode == backends.Shared {
		return h.last, nil
	}
	if h.limit > 1 {
		return backends.Grant{}, fmt.Errorf("%w: etcd share: a permit of a semaphore of %d cannot turn reader", backends.ErrInvalidOption, h.limit)
	}
	var resp *clientv3.TxnResponse
	err := h.s.d.call(ctx, "share", func(ctx context.Context) (err error) {
		resp, err = h.s.d.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(h.k.key), "=", h.rev)).
			Then(clientv3.OpPut(h.k.key, sharedValue(h.ident), clientv3.WithLease(h.s.id))).
			Commit()
		return err
	})
	if err != nil {
		return backends.Grant{}, err
	}
	if !resp.Succeeded {
		return backends.Grant{}, fmt.Errorf("%w: etcd key %s is gone (lease expired or force-released)", backends.ErrNotHeld, h.k.key)
	}
	h.mode = backends.Shared
	// The key was there with its lease just now, so the lease's latest
	// grant still holds.
	if g := h.s.currentGrant(); g.Sent.After(h.last.Sent) {
		h.last = g
	}
	return h.last, nil
}

// LeaseOf returns the session whose lease keeps h: the renewal loop
// renews each session once for all its holds (RenewLease).
func (d *driver) LeaseOf(h backends.Hold) any { return h.(*hold).s }

// RenewLease returns the session's next grant, one acknowledged after
// have (the keeper sends the keep-alives), then checks that the holds'
// keys still exist, in one read per 128 holds or one for the lease's
// attached keys: a force release deletes a key while its lease lives.
func (d *driver) RenewLease(ctx context.Context, lease any, have backends.Grant, holds []backends.Hold) (backends.Grant, []error, error) {
	s := lease.(*session)
	g, err := s.renew(ctx, have)
	if err != nil {
		return backends.Grant{}, nil, err
	}
	var lost []int
	if len(holds) > txnOps {
		// Every hold is the session's (LeaseOf): ask the lease, building
		// nothing per hold.
		lost, err = d.lostFromLease(ctx, s, len(holds), func(i int) *hold { return holds[i].(*hold) })
	} else {
		hs := make([]*hold, len(holds))
		for i, bh := range holds {
			hs[i] = bh.(*hold)
		}
		var gone map[*hold]bool
		gone, err = d.lostKeys(ctx, hs)
		for i, h := range hs {
			if gone[h] {
				lost = append(lost, i)
			}
		}
	}
	if err != nil {
		return backends.Grant{}, nil, err
	}
	var gone []error
	for _, i := range lost {
		if gone == nil {
			gone = make([]error, len(holds))
		}
		gone[i] = holds[i].(*hold).gone()
	}
	return g, gone, nil
}

// RenewBatch renews holds with one keep-alive per session lease: every hold
// of a Locker with one TTL shares its lease, and one grant newer than the
// oldest any of them has serves them all. One read (per 128 holds) then
// checks that their keys still exist: a force release deletes a key while
// its lease lives.
func (d *driver) RenewBatch(ctx context.Context, holds []backends.Hold) []backends.RenewResult {
	out := make([]backends.RenewResult, len(holds))
	bySession := map[*session][]*hold{}
	index := map[*hold]int{}
	for i, bh := range holds {
		h := bh.(*hold)
		bySession[h.s] = append(bySession[h.s], h)
		index[h] = i
	}
	var wg sync.WaitGroup
	for s, hs := range bySession {
		wg.Go(func() {
			oldest := hs[0].last
			for _, h := range hs[1:] {
				if h.last.Sent.Before(oldest.Sent) {
					oldest = h.last
				}
			}
			g, err := s.renew(ctx, oldest)
			var lost map[*hold]bool
			if err == nil {
				lost, err = d.lostKeys(ctx, hs)
			}
			for _, h := range hs {
				switch {
				case err != nil:
					out[index[h]] = backends.RenewResult{Err: err}
				case lost[h]:
					out[index[h]] = backends.RenewResult{Err: h.gone()}
				default:
					h.last = g
					out[index[h]] = backends.RenewResult{Grant: g}
				}
			}
		})
	}
	wg.Wait()
	return out
}
