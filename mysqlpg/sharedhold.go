package mysqlpg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/padlock-go/padlock/backends"
)

// errSlotGone is Renew's and Release's answer for a slot row that no
// longer names its hold.
var errSlotGone = fmt.Errorf("%w: the slot row no longer names this holder, or its lease ran out", backends.ErrNotHeld)

// releaseSlot frees h's slot row and settles its group's row (releaseTx):
// a reader's leaves without the name row's lock while other readers stay
// (shared_leave.sql), a permit's in one transaction that locks the name
// row first.
func (drv *driver) releaseSlot(ctx context.Context, h *leaseHold) error {
	qctx, cancel := drv.bound(ctx)
	defer cancel()
	err := drv.retrying(func() error { return drv.releaseTx(qctx, h) })
	if errors.Is(err, backends.ErrNotHeld) {
		return errSlotGone
	}
	return drv.d.classify(qctx, "sql release", err)
}

// settle runs shared_settle.sql for h's name, whose row tx locked and
// which has slots slot rows: its group's row expires with its last live
// slot, and waiters are woken.
func (drv *driver) settle(ctx context.Context, tx *sql.Tx, h *leaseHold, slots int) error {
	keys := make([][]byte, slots)
	for i := range keys {
		keys[i] = slotKey(h.name, i)
	}
	if slots == 0 {
		keys = [][]byte{h.slot} // a row that cannot be live: the list is never empty
	}
	if drv.notify != nil {
		stmt, args := drv.d.inArgs(drv.st.get("shared_settle"), []any{h.key, drv.channel}, inList{"slots", keys})
		var woken int64
		return tx.QueryRowContext(ctx, stmt, args...).Scan(&woken)
	}
	stmt, args := drv.d.inArgs(drv.st.get("shared_settle"), nil, inList{"slots", keys})
	_, err := tx.ExecContext(ctx, stmt, append(args, h.key)...)
	return err
}

// renewSlots renews slot holds that share one TTL, in one transaction:
// their groups' rows first (as every transaction on a name locks them),
// then their slot rows, with one expiry. If fewer slots changed than were
// asked for, each hold is renewed on its own to find out which are gone.
func (drv *driver) renewSlots(ctx context.Context, holds []*leaseHold) []backends.RenewResult {
	out := make([]backends.RenewResult, len(holds))
	n := len(holds)
	qctx, cancel := drv.bound(ctx)
	defer cancel()
	sent := time.Now()
	var changed int64
	err := drv.retrying(func() error {
		tx, err := drv.renewals().BeginTx(qctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return err
		}
		defer tx.Rollback()
		var until any
		if err := tx.QueryRowContext(qctx, drv.st.get("shared_until"), holds[0].ttl.Microseconds()).Scan(&until); err != nil {
			return err
		}
		if b, ok := until.([]byte); ok {
			until = string(b)
		}
		var names [][]byte
		seen := map[string]bool{}
		for _, h := range holds {
			if !seen[string(h.key)] {
				seen[string(h.key)] = true
				names = append(names, h.key)
			}
		}
		stmt, args := drv.d.inArgs(drv.st.get("shared_renew_names"), []any{until}, inList{"names", names})
		if _, err := tx.ExecContext(qctx, stmt, args...); err != nil {
			return err
		}
		slots, owners := make([][]byte, n), make([]string, n)
		for i, h := range holds {
			slots[i], owners[i] = h.slot, h.owner
		}
		stmt, args = drv.d.inArgs(drv.st.get("shared_renew_slots"), []any{until}, inList{"keys", slots}, inList{"owners", owners})
		res, err := tx.ExecContext(qctx, stmt, args...)
		if err != nil {
			return err
		}
		if changed, err = res.RowsAffected(); err != nil {
			return err
		}
		return tx.Commit()
	})
	switch {
	case err != nil:
		err = drv.d.classify(qctx, "sql renew", err)
		for i := range out {
			out[i].Err = err
		}
	case changed == int64(n):
		for i, h := range holds {
			out[i].Grant = backends.Grant{Sent: sent, TTL: h.ttl}
		}
	case n == 1:
		out[0].Err = errSlotGone
	default:
		for i, h := range holds {
			out[i] = drv.renewSlots(ctx, []*leaseHold{h})[0]
		}
	}
	return out
}

// Share turns a writer into a reader in place: in one transaction that
// locks the name row, the writer's row becomes its group's (readers, the
// token unchanged) and the hold moves to a slot row with its acquisition
// id, its token and a renewed lease. Run again on a hold that is a reader
// already (a Share whose answer was lost), it finds the hold's slot and
// renews it; Renew does that for such a hold, and Release tries both rows.
func (h *leaseHold) Share(ctx context.Context) (backends.Grant, error) {
	drv := h.drv
	if h.slot != nil && !h.unsure {
		return h.Renew(ctx) // a reader already
	}
	h.unsure = true
	qctx, cancel := drv.bound(ctx)
	defer cancel()
	sent := time.Now()
	var already bool
	err := drv.retrying(func() error {
		var err error
		already, err = drv.shareTx(qctx, h)
		return err
	})
	if err != nil {
		if errors.Is(err, backends.ErrNotHeld) {
			return backends.Grant{}, err
		}
		return backends.Grant{}, drv.d.classify(qctx, "sql share", err)
	}
	h.unsure, h.kind, h.limit = false, kindReaders, 1
	if already {
		return h.Renew(ctx)
	}
	return backends.Grant{Sent: sent, TTL: h.ttl}, nil
}

// shareTx is Share's transaction. It reports whether the hold was a
// reader already (then it changed nothing).
func (drv *driver) shareTx(ctx context.Context, h *leaseHold) (already bool, err error) {
	tx, err := drv.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	r, err := drv.lockName(ctx, tx, h.key, h.ttl)
	if errors.Is(err, sql.ErrNoRows) {
		return false, errSlotGone
	}
	if err != nil {
		return false, err
	}
	slots, keys, err := drv.readSlots(ctx, tx, h.name, r.slots)
	if err != nil {
		return false, err
	}
	free := len(slots)
	for i, s := range slots {
		if s.live && s.owner.String == h.owner {
			h.slot = keys[i]
			return true, nil
		}
		if !s.live {
			free = min(free, i)
		}
	}
	if !r.writer() || r.owner.String != h.owner {
		return false, fmt.Errorf("%w: the row no longer names this holder, or its lease ran out", backends.ErrNotHeld)
	}
	if free == len(keys) {
		keys = append(keys, slotKey(h.name, free))
	}
	h.slot = keys[free]
	if _, err := drv.groupRow(ctx, tx, h.key, r.until, kindReaders, 1, len(keys), 0); err != nil {
		return false, err
	}
	s := *h
	s.kind, s.limit = kindReaders, 1
	if err := drv.putSlot(ctx, tx, &s, h.token, r.until, free); err != nil {
		return false, err
	}
	return false, tx.Commit()
}
