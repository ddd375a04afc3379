package mysqlpg

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/padlock-go/padlock/backends"
)

// Holders lists the lease-mode locks held now, from the lock table. In
// advisory mode the database's own locks are the holds, and the rows do
// not say who has them now: ErrUnsupported.
func (drv *driver) Holders(ctx context.Context, prefix string) ([]backends.Holder, error) {
	if drv.cfg.mode != ModeLease {
		return nil, fmt.Errorf("%w: in advisory mode the lock table does not say who holds the database's locks", backends.ErrUnsupported)
	}
	qctx, cancel := drv.bound(ctx)
	defer cancel()
	rows, err := drv.db.QueryContext(qctx, drv.st.get("holders"))
	if err != nil {
		return nil, drv.d.classify(qctx, "sql holders", err)
	}
	defer rows.Close()
	now := time.Now()
	var out []backends.Holder
	for rows.Next() {
		var (
			name, holder []byte
			token        uint64
			id           string
			host         sql.NullString
			pid          sql.NullInt64
			age, left    sql.NullInt64 // microseconds, on the database's clock
		)
		if err := rows.Scan(&name, &token, &id, &host, &pid, &holder, &age, &left); err != nil {
			return nil, drv.d.classify(qctx, "sql holders", err)
		}
		if !strings.HasPrefix(string(name), prefix) {
			continue
		}
		h := backends.Holder{Name: string(name), Token: token, ID: id, Host: host.String,
			PID: int(pid.Int64), Owner: string(holder), Waiters: -1} // waiters leave no trace in lease mode
		if age.Valid {
			h.Since = now.Add(-time.Duration(age.Int64) * time.Microsecond)
		}
		if left.Valid {
			h.Expires = now.Add(time.Duration(left.Int64) * time.Microsecond)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, drv.d.classify(qctx, "sql holders", err)
	}
	slices.SortFunc(out, func(a, b backends.Holder) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// ForceRelease frees name's row on behalf of its holder: the release
// statement with the holder's acquisition id, so a lock that changed hands
// meanwhile is left alone (and waiters are woken as by a release). The
// holder's next renewal finds the row no longer names it.
func (drv *driver) ForceRelease(ctx context.Context, name string) (backends.Holder, error) {
	hs, err := drv.Holders(ctx, name)
	if err != nil {
		return backends.Holder{}, err
	}
	i := slices.IndexFunc(hs, func(h backends.Holder) bool { return h.Name == name })
	if i < 0 {
		return backends.Holder{}, fmt.Errorf("%w: nobody holds %q", backends.ErrNotHeld, name)
	}
	h := hs[i]
	hold := &leaseHold{drv: drv, key: lockKey(name), owner: h.ID}
	if err := hold.Release(ctx); err != nil {
		return backends.Holder{}, err
	}
	return h, nil
}
