package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/padlock-go/padlock/backends"
)

// hold is one acquisition: its queue node while it is the lowest.
type hold struct {
	s     *session
	path  string
	czxid int64 // the node's creating transaction: the fencing token
	grant backends.Grant
}

func (h *hold) Token() uint64         { return uint64(h.czxid) }
func (h *hold) Grant() backends.Grant { return h.grant }

// Renew proves the session alive, and the node still there, with one read.
// ZooKeeper's own heartbeat is what keeps the session; the grant only says
// how long the server is bound to keep it from the moment this read was
// sent: the session timeout it granted. A disconnection never extends it.
func (h *hold) Renew(ctx context.Context) (backends.Grant, error) {
	sent := time.Now()
	ok, err := call(ctx, h.s, "renew", func() (bool, error) {
		ok, _, err := h.s.conn.Exists(h.path)
		return ok, err
	})
	return h.renewed(sent, ok, err)
}

func (h *hold) renewed(sent time.Time, exists bool, err error) (backends.Grant, error) {
	switch {
	case errors.Is(err, errSessionExpired):
		return backends.Grant{}, fmt.Errorf("%w: %w", backends.ErrNotHeld, err)
	case err != nil:
		return backends.Grant{}, err
	case !exists:
		return backends.Grant{}, fmt.Errorf("%w: zookeeper node %s is gone", backends.ErrNotHeld, h.path)
	}
	return backends.Grant{Sent: sent, TTL: h.s.ttl}, nil
}

// Release deletes the node, which wakes the next waiter's watch. A node
// that is gone already (the session expired) is ErrNotHeld.
func (h *hold) Release(ctx context.Context) error {
	err := do(ctx, h.s, "release", func() error { return h.s.conn.Delete(h.path, -1) })
	switch {
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, errSessionExpired):
		return fmt.Errorf("%w: zookeeper node %s is gone: %w", backends.ErrNotHeld, h.path, err)
	}
	return err
}

// RenewBatch renews holds with one request per session: a multi-op that
// checks every node exists. If one is gone, each is checked on its own.
func (d *driver) RenewBatch(ctx context.Context, holds []backends.Hold) []backends.RenewResult {
	out := make([]backends.RenewResult, len(holds))
	bySession := map[*session][]int{}
	for i, bh := range holds {
		bySession[bh.(*hold).s] = append(bySession[bh.(*hold).s], i)
	}
	for s, idx := range bySession {
		ops := make([]any, len(idx))
		for j, i := range idx {
			ops[j] = &zk.CheckVersionRequest{Path: holds[i].(*hold).path, Version: -1}
		}
		sent := time.Now()
		err := do(ctx, s, "renew", func() error {
			res, err := s.conn.Multi(ops...)
			for _, r := range res {
				if err == nil && r.Error != nil {
					err = r.Error
				}
			}
			return err
		})
		for _, i := range idx {
			h := holds[i].(*hold)
			if err != nil && !errors.Is(err, errSessionExpired) && !errors.Is(err, backends.ErrUnavailable) {
				out[i].Grant, out[i].Err = h.Renew(ctx)
				continue
			}
			out[i].Grant, out[i].Err = h.renewed(sent, true, err)
		}
	}
	return out
}
