package mysqlpg

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/padlock-go/padlock/backends"
)

var _ backends.ForcedLister = (*driver)(nil)

// forcedRecord is the forced column's JSON: the forced hold's token and
// acquisition id (the row has the name, forced_at the time).
type forcedRecord struct {
	Token uint64 `json:"token"`
	ID    string `json:"id"`
}

// ensureForcedColumns adds the forced and forced_at columns (the record of
// a name's latest forced release) to a lock table made before they
// existed. Open goes on without them if it may not (only ForcedReleases
// needs them); padlock migrate adds them.
func (drv *driver) ensureForcedColumns(ctx context.Context) error {
	return drv.migration(ctx, "forced_column", "add_forced", "the forced and forced_at columns")
}

// forceLease releases h's row on its holder's behalf and records why, in
// one transaction: whoever sees the row free can see the record.
func (drv *driver) forceLease(ctx context.Context, h backends.Holder) error {
	qctx, cancel := drv.bound(ctx)
	defer cancel()
	record, _ := json.Marshal(forcedRecord{Token: h.Token, ID: h.ID})
	key := lockKey(h.Name)
	tx, err := drv.db.BeginTx(qctx, nil)
	if err != nil {
		return drv.d.classify(qctx, "sql force release", err)
	}
	defer tx.Rollback()
	var n int64
	res, err := tx.ExecContext(qctx, drv.st.get("forced_mark"), string(record), key, h.ID)
	if err == nil {
		n, err = res.RowsAffected()
	}
	release := drv.st.get("lease_release")
	if h.Elect {
		release = drv.st.get("elect_release") // the candidacy's value goes with it
	}
	if err == nil && n == 1 {
		if drv.notify == nil {
			if res, err = tx.ExecContext(qctx, release, key, h.ID); err == nil {
				n, err = res.RowsAffected()
			}
		} else {
			var woken int64
			err = tx.QueryRowContext(qctx, release, key, h.ID, drv.channel).Scan(&n, &woken)
		}
	}
	if err == nil && n == 1 {
		err = tx.Commit()
	}
	if err != nil {
		return drv.d.classify(qctx, "sql force release", err)
	}
	if n != 1 {
		return fmt.Errorf("%w: %q changed hands meanwhile (token %d released)", backends.ErrNotHeld, h.Name, h.Token)
	}
	return nil
}

// forceAdvisory ends the session that holds the advisory locks of hs,
// having recorded the forced release of each in its row first: ending a
// session is no statement a transaction can hold back, and it frees every
// lock the session held. If it fails the records are withdrawn.
func (drv *driver) forceAdvisory(ctx context.Context, hs []backends.Holder, info map[string]holdRow, session int64) error {
	qctx, cancel := drv.bound(ctx)
	defer cancel()
	records := make([]string, len(hs))
	for i, h := range hs {
		b, _ := json.Marshal(forcedRecord{Token: h.Token, ID: h.ID})
		records[i] = string(b)
		if drv.forcedErr != nil {
			continue // an older table: no record
		}
		res, err := drv.db.ExecContext(qctx, drv.st.get("forced_mark"), records[i], rowKey(h, info), h.ID)
		var n int64
		if err == nil {
			n, err = res.RowsAffected()
		}
		if err != nil || n != 1 {
			// Withdraw the records written: the session is not ended.
			for j := range i {
				_, _ = drv.db.ExecContext(qctx, drv.st.get("forced_clear"), rowKey(hs[j], info), records[j])
			}
			if err != nil {
				return fmt.Errorf("recording the forced release of %q: %w", h.Name, drv.d.classify(qctx, "sql force release", err))
			}
			// Its row names another acquisition now: the hold read was
			// released, and the session may hold the name again for a
			// newer one, which ending it would take without a record.
			return fmt.Errorf("%w: %q changed hands meanwhile (token %d released)", backends.ErrNotHeld, h.Name, h.Token)
		}
	}
	if _, err := drv.db.ExecContext(qctx, drv.st.get("advisory_kill"), session); err != nil {
		for i, h := range hs {
			if drv.forcedErr == nil {
				_, _ = drv.db.ExecContext(qctx, drv.st.get("forced_clear"), rowKey(h, info), records[i])
			}
		}
		return fmt.Errorf("ending the session that holds %q: %w", hs[0].Name, drv.d.classify(qctx, "sql force release", err))
	}
	return nil
}

// rowKey is the key of h's row: its own (a reader's or permit's), or its
// name's.
func rowKey(h backends.Holder, info map[string]holdRow) []byte {
	if k := info[h.ID].key; k != nil {
		return k
	}
	return lockKey(h.Name)
}

// ForcedReleases reads the latest forced release of every name under
// prefix, on the database's clock.
func (drv *driver) ForcedReleases(ctx context.Context, prefix string) ([]backends.ForcedRelease, error) {
	if drv.forcedErr != nil {
		return nil, fmt.Errorf("%w: %w", backends.ErrUnsupported, drv.forcedErr)
	}
	qctx, cancel := drv.bound(ctx)
	defer cancel()
	rows, err := drv.db.QueryContext(qctx, drv.st.get("forced_list"), backends.ForcedRetention.Microseconds())
	if err != nil {
		return nil, drv.d.classify(qctx, "sql forced releases", err)
	}
	defer rows.Close()
	now := time.Now()
	var out []backends.ForcedRelease
	for rows.Next() {
		var (
			name   []byte
			record string
			age    sql.NullInt64
		)
		if err := rows.Scan(&name, &record, &age); err != nil {
			return nil, drv.d.classify(qctx, "sql forced releases", err)
		}
		var r forcedRecord
		if !strings.HasPrefix(string(name), prefix) || json.Unmarshal([]byte(record), &r) != nil {
			continue
		}
		out = append(out, backends.ForcedRelease{Name: string(name), Token: r.Token, ID: r.ID,
			At: now.Add(-time.Duration(age.Int64) * time.Microsecond)})
	}
	if err := rows.Err(); err != nil {
		return nil, drv.d.classify(qctx, "sql forced releases", err)
	}
	slices.SortFunc(out, func(a, b backends.ForcedRelease) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// ensureSharedColumns runs migration 3: the columns of readers and
// permits (kind, lim, slots, parent) on a lock table made before they
// existed. Open goes on without them if it may not add them (lease mode
// then offers no readers or permits); padlock migrate adds them.
func (drv *driver) ensureSharedColumns(ctx context.Context) error {
	return drv.migration(ctx, "shared_column", "add_shared", "the columns of readers and permits (kind, lim, slots, parent)")
}

// forceSlot frees a reader's or permit's slot row on its holder's behalf
// and records why, in one transaction that locks the name row first, as
// the holder's own release does.
func (drv *driver) forceSlot(ctx context.Context, o backends.Holder) error {
	qctx, cancel := drv.bound(ctx)
	defer cancel()
	record, _ := json.Marshal(forcedRecord{Token: o.Token, ID: o.ID})
	h := &leaseHold{drv: drv, key: lockKey(o.Name), name: o.Name, owner: o.ID}
	err := drv.retrying(func() error {
		tx, err := drv.db.BeginTx(qctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return err
		}
		defer tx.Rollback()
		r, err := drv.lockName(qctx, tx, h.key, 0)
		if err != nil {
			return err
		}
		slots, keys, err := drv.readSlots(qctx, tx, o.Name, r.slots)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(slots, func(s slotRow) bool { return s.live && s.owner.String == o.ID })
		if i < 0 {
			return errSlotGone
		}
		h.slot = keys[i]
		if drv.forcedErr == nil {
			if _, err := tx.ExecContext(qctx, drv.st.get("forced_mark"), string(record), h.slot, o.ID); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(qctx, drv.st.get("shared_release"), h.slot, o.ID); err != nil {
			return err
		}
		if err := drv.settle(qctx, tx, h, r.slots); err != nil {
			return err
		}
		return tx.Commit()
	})
	if errors.Is(err, backends.ErrNotHeld) {
		return err
	}
	return drv.d.classify(qctx, "sql force release", err)
}
