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

// Holders lists the locks held now. In lease mode they are the rows whose
// lease runs; in advisory mode the rows whose advisory lock a session of
// the database holds now (pg_locks, IS_USED_LOCK): the database's own
// locks are the holds, and the row names who took it.
func (drv *driver) Holders(ctx context.Context, prefix string) ([]backends.Holder, error) {
	hs, _, err := drv.holders(ctx, prefix)
	return hs, err
}

// holders returns the holders and, in advisory mode, the database session
// that holds each (by name).
func (drv *driver) holders(ctx context.Context, prefix string) ([]backends.Holder, map[string]int64, error) {
	stmt := "lease_holders"
	if drv.cfg.mode != ModeLease {
		stmt = "advisory_holders"
	}
	qctx, cancel := drv.bound(ctx)
	defer cancel()
	rows, err := drv.db.QueryContext(qctx, drv.st.get(stmt))
	if err != nil {
		return nil, nil, drv.d.classify(qctx, "sql holders", err)
	}
	defer rows.Close()
	now := time.Now()
	var out []backends.Holder
	sessions := map[string]int64{}
	for rows.Next() {
		var (
			name, holder []byte
			token        uint64
			id           string
			host         sql.NullString
			pid          sql.NullInt64
			age, left    sql.NullInt64 // microseconds, on the database's clock
			session      sql.NullInt64 // advisory mode: the holding session
		)
		if err := rows.Scan(&name, &token, &id, &host, &pid, &holder, &age, &left, &session); err != nil {
			return nil, nil, drv.d.classify(qctx, "sql holders", err)
		}
		if !strings.HasPrefix(string(name), prefix) {
			continue
		}
		h := backends.Holder{Name: string(name), Token: token, ID: id, Host: host.String,
			PID: int(pid.Int64), Owner: string(holder), Waiters: -1} // waiters leave no trace in the table
		if session.Valid {
			sessions[h.Name] = session.Int64
		}
		if age.Valid {
			h.Since = now.Add(-time.Duration(age.Int64) * time.Microsecond)
		}
		if left.Valid {
			h.Expires = now.Add(time.Duration(left.Int64) * time.Microsecond)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, drv.d.classify(qctx, "sql holders", err)
	}
	slices.SortFunc(out, func(a, b backends.Holder) int { return strings.Compare(a.Name, b.Name) })
	return out, sessions, nil
}

// ForceRelease takes name from its holder. In lease mode it frees the row
// on the holder's behalf: the release statement with the holder's
// acquisition id, so a lock that changed hands meanwhile is left alone
// (and waiters are woken as by a release); the holder's next renewal finds
// the row no longer names it. In advisory mode only the holding session
// can free the database's lock, so it ends that session
// (pg_terminate_backend, KILL CONNECTION): every lock the session held is
// freed, and their holders' Done close as soon as their drivers see the
// session die. Either way the row records the forced release (the forced
// columns), in lease mode in the release's own transaction.
func (drv *driver) ForceRelease(ctx context.Context, name string) (backends.Holder, error) {
	hs, sessions, err := drv.holders(ctx, "") // every one: a session may hold others too
	if err != nil {
		return backends.Holder{}, err
	}
	i := slices.IndexFunc(hs, func(h backends.Holder) bool { return h.Name == name })
	if i < 0 {
		return backends.Holder{}, fmt.Errorf("%w: nobody holds %q", backends.ErrNotHeld, name)
	}
	h := hs[i]
	switch {
	case drv.cfg.mode != ModeLease:
		// Ending the session frees every lock it holds: h's first.
		same := []backends.Holder{h}
		for _, o := range hs {
			if o.Name != name && sessions[o.Name] == sessions[name] {
				same = append(same, o)
			}
		}
		err = drv.forceAdvisory(ctx, same, sessions[name])
	case drv.forcedErr != nil: // an older table: no record
		err = (&leaseHold{drv: drv, key: lockKey(name), owner: h.ID}).Release(ctx)
	default:
		err = drv.forceLease(ctx, h)
	}
	if err != nil {
		return backends.Holder{}, err
	}
	return h, nil
}
