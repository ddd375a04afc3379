package etcd

import (
	"context"
	"fmt"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/padlock-go/padlock/backends"
)

// hold is one acquisition: our queue key while it is the oldest.
type hold struct {
	s     *session
	key   string
	rev   int64 // create revision of key: the fencing token
	grant backends.Grant
}

func (h *hold) acquired() *hold {
	h.grant = h.s.currentGrant()
	return h
}

func (h *hold) Token() uint64         { return uint64(h.rev) }
func (h *hold) Grant() backends.Grant { return h.grant }

func (h *hold) Renew(ctx context.Context) (backends.Grant, error) { return h.s.renew(ctx) }

// Release deletes our key only if it is still the one we created: a stale
// retry must never delete a newer hold that reused the name (etcd #22082).
func (h *hold) Release(ctx context.Context) error {
	var resp *clientv3.TxnResponse
	err := h.s.d.call(ctx, "release", func(ctx context.Context) (err error) {
		resp, err = h.s.d.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(h.key), "=", h.rev)).
			Then(clientv3.OpDelete(h.key)).
			Commit()
		return err
	})
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: etcd key %s is gone (lease expired)", backends.ErrNotHeld, h.key)
	}
	return nil
}

// RenewBatch renews holds with one keep-alive per session lease: every hold
// of a Locker with one TTL shares its lease.
func (d *driver) RenewBatch(ctx context.Context, holds []backends.Hold) []backends.RenewResult {
	out := make([]backends.RenewResult, len(holds))
	bySession := map[*session][]int{}
	for i, bh := range holds {
		h := bh.(*hold)
		bySession[h.s] = append(bySession[h.s], i)
	}
	var wg sync.WaitGroup
	for s, idx := range bySession {
		wg.Go(func() {
			g, err := s.renew(ctx)
			for _, i := range idx {
				out[i] = backends.RenewResult{Grant: g, Err: err}
			}
		})
	}
	wg.Wait()
	return out
}
