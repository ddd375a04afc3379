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
	hs, _, err := drv.holders(ctx, prefix)
	return hs, err
}

// holdRow is what holders learns of one hold beside its Holder: in
// advisory mode the database session that holds it and its row's key;
// whether it holds a slot row (a reader or permit).
type holdRow struct {
	session int64
	key     []byte
	slot    bool
}

// holders returns the holders and, by acquisition id, what else it read
// of each (holdRow).
func (drv *driver) holders(ctx context.Context, prefix string) ([]backends.Holder, map[string]holdRow, error) {
	stmt := "lease_holders"
	shared := drv.cfg.mode == ModeLease && drv.sharedErr == nil
	advisory := drv.cfg.mode != ModeLease
	switch {
	case advisory:
		stmt = "advisory_holders"
	case shared:
		stmt = "lease_holders_shared"
	}
	qctx, cancel := drv.bound(ctx)
	defer cancel()
	now := time.Now() // what is left is counted from here: Expires is never late
	rows, err := drv.db.QueryContext(qctx, drv.st.get(stmt))
	if err != nil {
		return nil, nil, drv.d.classify(qctx, "sql holders", err)
	}
	defer rows.Close()
	var out []backends.Holder
	info := map[string]holdRow{}
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
			slot         bool   // a reader's or permit's row
			key          []byte // advisory mode: the row's key
		)
		dest := []any{&name, &token, &id, &host, &pid, &holder, &age, &left, &session}
		if shared || advisory {
			dest = append(dest, &kind, &lim, &slot)
		}
		if advisory {
			dest = append(dest, &key)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, nil, drv.d.classify(qctx, "sql holders", err)
		}
		if !strings.HasPrefix(string(name), prefix) {
			continue
		}
		h := backends.Holder{Name: string(name), Token: token, ID: id, Host: host.String,
			PID: int(pid.Int64), Owner: string(holder), Mode: backends.Exclusive, Limit: 1,
			Waiters: -1} // waiters leave no trace in the table
		info[id] = holdRow{session: session.Int64, key: key, slot: slot}
		if slot {
			if kind.String == kindReaders {
				h.Mode = backends.Shared
			} else if lim.Valid {
				h.Limit = int(lim.Int64)
			}
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
	rows.Close()
	// Candidacies: by acquisition id, which is unique, so a hold listed
	// above that ended meanwhile simply has no match.
	elect, err := drv.electHolders(qctx)
	if err != nil {
		return nil, nil, drv.d.classify(qctx, "sql holders", err)
	}
	for i := range out {
		if v, ok := elect[out[i].ID]; ok {
			out[i].Elect, out[i].Value = true, v
		}
	}
	slices.SortFunc(out, func(a, b backends.Holder) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(a.Token, b.Token))
	})
	return out, info, nil
}

// ForceRelease takes name from its holders. In lease mode it frees each
// hold's row on the holder's behalf (a writer's name row, or every
// reader's or permit's slot row): the release with the holder's
// acquisition id, so a hold that ended meanwhile is left alone (and
// waiters are woken as by a release); each holder's next renewal finds its
// row no longer names it. In advisory mode only the holding session can
// free the database's lock, so it ends every session that holds the name
// (a writer's, or each reader's and permit's: pg_terminate_backend, KILL
// CONNECTION): every lock those sessions held is freed, and their
// holders' Done close as soon as their drivers see the session die.
// Either way each row records its forced release (the forced columns), in
// lease mode in the release's own transaction. It returns the oldest hold
// it removed.
func (drv *driver) ForceRelease(ctx context.Context, name string) (backends.Holder, error) {
	hs, info, err := drv.holders(ctx, "") // every one: a session may hold others too
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
	if drv.cfg.mode != ModeLease {
		return mine[0], drv.forceSessions(ctx, name, mine, hs, info)
	}
	var (
		errs  []error
		freed = -1
	)
	for i, o := range mine {
		var err error
		switch {
		case info[o.ID].slot:
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

// forceSessions is ForceRelease in advisory mode: it ends each session
// that holds one of mine (the holds of name, oldest first), recording the
// forced release of every hold on it (hs: all of them) first.
func (drv *driver) forceSessions(ctx context.Context, name string, mine, hs []backends.Holder, info map[string]holdRow) error {
	done := map[int64]bool{}
	for _, h := range mine {
		session := info[h.ID].session
		if done[session] {
			continue
		}
		done[session] = true
		// Ending the session frees every lock it holds: h's first.
		same := []backends.Holder{h}
		for _, o := range hs {
			if o.ID != h.ID && info[o.ID].session == session {
				same = append(same, o)
			}
		}
		if err := drv.forceAdvisory(ctx, same, info, session); err != nil {
			return err
		}
		// The session's end took the candidacies' marks: their rows are
		// no leaders. Their values go too; a failure leaves a value that
		// Leader never reports, and the next candidacy overwrites.
		qctx, cancel := drv.bound(ctx)
		for _, o := range same {
			if o.Elect {
				_ = drv.clearElect(qctx, o.Name, o.ID)
			}
		}
		cancel()
	}
	return nil
}
