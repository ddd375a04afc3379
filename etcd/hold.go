package etcd

import (
	"context"
	"fmt"

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
	resp, err := h.s.d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(h.key), "=", h.rev)).
		Then(clientv3.OpDelete(h.key)).
		Commit()
	if err != nil {
		return unavailable("release", err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: etcd key %s is gone (lease expired)", backends.ErrNotHeld, h.key)
	}
	return nil
}
