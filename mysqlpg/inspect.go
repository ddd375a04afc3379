package mysqlpg

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
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
// In lease mode a name held by readers or permits has one entry for each.
func (drv *driver) Holders(ctx context.Context, prefix string) ([]backends.Holder, error) {
	hs, _, _, err := drv.holders(ctx, prefix)
	return hs, err
}

// holders returns the holders and, in advisory mode, the database session
// that holds each (by name); in lease mode, which of them hold slot rows
// (readers and permits: by acquisition id).
func (drv *driver) holders(ctx context.Context, prefix string) ([]backends.Holder, map[string]int64, map[string]bool, error) {
	stmt := "lease_holders"
	shared := drv.cfg.mode == ModeLease && drv.sharedErr == nil
	switch {
	case drv.cfg.mode != ModeLease:
		stmt = "advisory_holders"
	case shared:
		stmt = "lease_holders_shared"
	}
	qctx, cancel := drv.bound(ctx)
	defer cancel()
	rows, err := drv.db.QueryContext(qctx, drv.st.get(stmt))
	if err != nil {
		return nil, nil, nil, drv.d.classify(qctx, "sql holders", err)
	}
	defer rows.Close()
	now := time.Now()
	var out []backends.Holder
	sessions := map[string]int64{}
	slots := map[string]bool{}
	for rows.Next() {
		var (
			name, holder []byte
			token        uint64
			id           string
			host         sql.NullString
			pid          sql.NullInt64
			age, left    sql.NullInt64 // microseconds, on the database's clock
			session      sql.NullInt64 // advisory mode: the holding session
			kind         sql.NullString
			lim          sql.NullInt64
			slot         bool // a reader's or permit's row
		)
		dest := []any{&name, &token, &id, &host, &pid, &holder, &age, &left, &session}
		if shared {
			dest = append(dest, &kind, &lim, &slot)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, nil, nil, drv.d.classify(qctx, "sql holders", err)
		}
		if !strings.HasPrefix(string(name), prefix) {
			continue
		}
		h := backends.Holder{Name: string(name), Token: token, ID: id, Host: host.String,
			PID: int(pid.Int64), Owner: string(holder), Mode: backends.Exclusive, Limit: 1,
			Waiters: -1} // waiters leave no trace in the table
		if slot {
			slots[id] = true
			if kind.String == kindReaders {
				h.Mode = backends.Shared
			} else if lim.Valid {
				h.Limit = int(lim.Int64)
			}
		}
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
		return nil, nil, nil, drv.d.classify(qctx, "sql holders", err)
	}
	rows.Close()
	// Candidacies: by acquisition id, which is unique, so a hold listed
	// above that ended meanwhile simply has no match.
	elect, err := drv.electHolders(qctx)
	if err != nil {
		return nil, nil, nil, drv.d.classify(qctx, "sql holders", err)
	}
	for i := range out {
		if v, ok := elect[out[i].ID]; ok {
			out[i].Elect, out[i].Value = true, v
		}
	}
	slices.SortFunc(out, func(a, b backends.Holder) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(a.Token, b.Token))
	})
	return out, sessions, slots, nil
}

// ForceRelease takes name from its holders. In lease mode it frees each
// hold's row on the holder's behalf (a writer's name row, or every
// reader's or permit's slot row): the release with the holder's
// acquisition id, so a hold that ended meanwhile is left alone (and
// waiters are woken as by a release); each holder's next renewal finds its
// row no longer names it. In advisory mode only the holding session can
// free the database's lock, so it ends that session (pg_terminate_backend,
// KILL CONNECTION): every lock the session held is freed, and their
// holders' Done close as soon as their drivers see the session die. Either
// way each row records its forced release (the forced columns), in lease
// mode in the release's own transaction. It returns the oldest hold it
// removed.
func (drv *driver) ForceRelease(ctx context.Context, name string) (backends.Holder, error) {
	hs, sessions, slots, err := drv.holders(ctx, "") // every one: a session may hold others too
	if err != nil {
		return backends.Holder{}, err
	}
	var mine []backends.Holder
	for _, h := range hs {
		if h.Name == name {
			mine = append(mine, h)
		}
	}
	if len(mine) == 0 {
		return backends.Holder{}, fmt.Errorf("%w: nobody holds %q", backends.ErrNotHeld, name)
	}
	h := mine[0] // the lowest token: the oldest
	if drv.cfg.mode != ModeLease {
		// Ending the session frees every lock it holds: h's first.
		same := []backends.Holder{h}
		for _, o := range hs {
			if o.Name != name && sessions[o.Name] == sessions[name] {
				same = append(same, o)
			}
		}
		if err := drv.forceAdvisory(ctx, same, sessions[name]); err != nil {
			return backends.Holder{}, err
		}
		// The session's end took the candidacies' marks: their rows are
		// no leaders. Their values go too; a failure leaves a value that
		// Leader never reports, and the next candidacy overwrites.
		qctx, cancel := drv.bound(ctx)
		defer cancel()
		for _, o := range same {
			if o.Elect {
				_ = drv.clearElect(qctx, o.Name, o.ID)
			}
		}
		return h, nil
	}
	var (
		errs  []error
		freed = -1
	)
	for i, o := range mine {
		var err error
		switch {
		case slots[o.ID]:
			err = drv.forceSlot(ctx, o)
		case drv.forcedErr != nil: // an older table: no record
			err = (&leaseHold{drv: drv, key: lockKey(name), owner: o.ID, elect: o.Elect}).Release(ctx)
		default:
			err = drv.forceLease(ctx, o)
		}
		if err == nil && freed < 0 {
			freed = i
		}
		if err != nil && !errors.Is(err, backends.ErrNotHeld) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return backends.Holder{}, err
	}
	if freed < 0 {
		return backends.Holder{}, fmt.Errorf("%w: the holds of %q ended meanwhile", backends.ErrNotHeld, name)
	}
	return mine[freed], nil
}
