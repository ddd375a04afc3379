package zookeeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/padlock-go/padlock/backends"
)

// Share turns a writer into a reader in place: one setData on its own
// node, marking it shared (nodeData.Mode), checked against the version it
// was created with. The node keeps its name, so its place in line and its
// czxid (the token); its session is its lease. Readers watching it (the
// last unshared writer ahead of them) are woken by the change and enter;
// writers behind it still wait, since a writer holds only as the lowest
// node.
//
// Curator's downgrade is not copied: it takes a read lock (a new node,
// behind every writer already queued) and then releases the write lock,
// so the first queued writer becomes the lowest node and is granted
// beside the downgraded reader (docs/zookeeper.md, "Read-write locks and
// semaphores").
//
// A Share whose answer was lost leaves the node either way: a second
// Share finds it shared (the version moved, and only the holder writes
// its node); Renew and Release work in both states.
func (h *hold) Share(ctx context.Context) (backends.Grant, error) {
	if h.kind != writer {
		return backends.Grant{}, fmt.Errorf("%w: zookeeper node %s is not a writer's: only a writer turns into a reader", backends.ErrInvalidOption, h.path)
	}
	if h.lost.Err() != nil {
		return backends.Grant{}, fmt.Errorf("%w: zookeeper node %s: %w", backends.ErrNotHeld, h.path, context.Cause(h.lost))
	}
	data, err := sharedData(h.data)
	if err != nil {
		return backends.Grant{}, err
	}
	// The change fires the watch that tells the hold its node was
	// deleted (every watch fires once): it must be set again after.
	h.rearm.Store(true)
	err = do(ctx, h.s, "share", func() error {
		_, err := h.s.conn.Set(h.path, data, 0)
		if errors.Is(err, zk.ErrBadVersion) {
			// Changed since it was made: by an earlier Share whose
			// answer was lost, if it says shared.
			now, _, gerr := h.s.conn.Get(h.path)
			if gerr == nil && shared(now) {
				return nil
			}
			if gerr != nil {
				return gerr
			}
		}
		return err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, errSessionExpired):
		return backends.Grant{}, fmt.Errorf("%w: zookeeper node %s is gone: %w", backends.ErrNotHeld, h.path, err)
	case errors.Is(err, zk.ErrBadVersion):
		return backends.Grant{}, fmt.Errorf("%w: zookeeper node %s was changed by another client, not shared: %w", backends.ErrUnavailable, h.path, err)
	case err != nil:
		return backends.Grant{}, err
	}
	return h.Renew(ctx)
}

// sharedData is a writer's node data marked shared.
func sharedData(data []byte) ([]byte, error) {
	var nd nodeData
	if err := json.Unmarshal(data, &nd); err != nil {
		return nil, fmt.Errorf("zookeeper: a node's own data does not parse: %w", err)
	}
	nd.Mode = modeShared
	return json.Marshal(nd)
}

// watchAgain sets the watch on the hold's own node again, after a change
// of its data fired it (a Share). It reports ErrNotHeld if the node is
// gone.
func (h *hold) watchAgain(ctx context.Context) error {
	h.rearm.Store(false) // a change from here on asks again
	_, err := readNode(ctx, h.s, h.path)
	switch {
	case errors.Is(err, errSessionExpired):
		h.gone(errNodeDeleted)
		return fmt.Errorf("%w: zookeeper node %s is gone: %w", backends.ErrNotHeld, h.path, err)
	case err != nil:
		h.rearm.Store(true)
		return err
	}
	return nil
}
