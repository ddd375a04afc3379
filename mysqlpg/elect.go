package mysqlpg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/padlock-go/padlock/backends"
)

// Elections (docs/election.md). A candidacy is a writer whose row says so:
// its acquisition writes elect (its own acquisition id) and elect_value
// with the grant, in the statement that takes the row, and the holder is a
// leader exactly while owner = elect. A plain lock's statements never name
// these columns, so they run as they did; a plain lock that takes a row
// over from a candidacy leaves elect naming the old acquisition, which is
// not the owner: no leader. In advisory mode the row also names its
// session's mark (advisory_mark.sql), and Leader asks the server whether
// the session holding the name's lock now holds that mark too. Proclaim
// rewrites elect_value while the hold holds, checked by the server; on
// PostgreSQL grants, releases and Proclaims of candidacies NOTIFY the
// table's channel, which Watch (watch.go) follows.

var (
	_ backends.Elector    = (*driver)(nil)
	_ backends.Proclaimer = (*leaseHold)(nil)
	_ backends.Proclaimer = (*advHold)(nil)
)

// ensureElectColumns runs migration 4: the columns of elections (elect,
// elect_value, adv_mark) on a lock table made before they existed. Open
// goes on without them if it may not add them (Capabilities then report
// no Elections); padlock migrate adds them.
func (drv *driver) ensureElectColumns(ctx context.Context) error {
	return drv.migration(ctx, "elect_column", "add_elect", "the columns of elections (elect, elect_value, adv_mark)")
}

// electArgs are the parameters a candidacy's acquisition adds to the plain
// one's: on PostgreSQL its value and the channel to tell; on MySQL its
// acquisition id again (for elect) and its value.
func (drv *driver) electArgs(owner, value string) []any {
	if drv.notify != nil {
		return []any{[]byte(value), drv.channel}
	}
	return []any{owner, []byte(value)}
}

// Leader reads the name's leader: in lease mode the row's holder while its
// lease runs on the database's clock, in advisory mode while the session
// that holds the name's lock holds the row's mark; either way only when
// the holder is a candidacy. One statement on the primary the pool
// reaches, which is linearizable.
func (drv *driver) Leader(ctx context.Context, name string) (backends.Leader, bool, error) {
	if drv.electErr != nil {
		return backends.Leader{}, false, fmt.Errorf("%w: %w", backends.ErrUnsupported, drv.electErr)
	}
	stmt := "elect_leader"
	if drv.adv != nil {
		stmt = "advisory_elect_leader"
	}
	qctx, cancel := drv.bound(ctx)
	defer cancel()
	var (
		token uint64
		value []byte
	)
	err := drv.db.QueryRowContext(qctx, drv.st.get(stmt), lockKey(name)).Scan(&token, &value)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return backends.Leader{}, false, nil
	case err != nil:
		return backends.Leader{}, false, drv.d.classify(qctx, "sql leader", err)
	}
	return backends.Leader{Value: string(value), Token: token}, true, nil
}

// Proclaim replaces the candidacy's value with one UPDATE that matches
// only while the row names this acquisition and its lease runs (on the
// database's clock), leaving the lease as it is. A deposed leader's
// matches nothing: ErrNotHeld.
func (h *leaseHold) Proclaim(ctx context.Context, value string) error {
	drv := h.drv
	if !h.elect {
		return fmt.Errorf("%w: this hold is no candidacy", backends.ErrNotHeld)
	}
	qctx, cancel := drv.bound(ctx)
	defer cancel()
	var n int64
	err := drv.retrying(func() error {
		var err error
		n, err = drv.proclaimOn(qctx, drv.db, "elect_proclaim", "elect_held", value, h.key, h.owner)
		return err
	})
	if err != nil {
		return drv.d.classify(qctx, "sql proclaim", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: the row no longer names this candidate, or its lease ran out", backends.ErrNotHeld)
	}
	return nil
}

// proclaimOn runs a Proclaim statement on q and returns how many rows it
// matched. On PostgreSQL the statement also notifies. MySQL counts changed
// rows, not matched ones, so after a Proclaim of the value the row already
// had, held tells whether the hold still holds (it cannot hold again once
// it stopped: its acquisition id is its own).
func (drv *driver) proclaimOn(ctx context.Context, q querier, stmt, held, value string, key []byte, owner string) (int64, error) {
	args := []any{[]byte(value), key, owner}
	var n int64
	if drv.notify != nil {
		var woken int64
		err := q.QueryRowContext(ctx, drv.st.get(stmt), append(args, drv.channel)...).Scan(&n, &woken)
		return n, err
	}
	res, err := q.ExecContext(ctx, drv.st.get(stmt), args...)
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil || n > 0 {
		return n, err
	}
	err = q.QueryRowContext(ctx, drv.st.get(held), key, owner).Scan(&n)
	return n, err
}

// Proclaim replaces the candidacy's value on its own session, with one
// UPDATE that matches only while the row names this acquisition and this
// session holds the name's advisory lock. A session that died, or whose
// connection fails under the Proclaim, lost the lock with it: ErrNotHeld
// once the server answers on another connection (it has then seen the
// connection go), as Release says (wentWithSession).
func (h *advHold) Proclaim(ctx context.Context, value string) error {
	a, drv := h.a, h.a.drv
	if !h.elect {
		return fmt.Errorf("%w: this hold is no candidacy", backends.ErrNotHeld)
	}
	var n int64
	err := h.s.run(ctx, drv, func(ctx context.Context, s *session) error {
		var err error
		n, err = drv.proclaimOn(ctx, s.conn, "advisory_elect_proclaim", "advisory_elect_held", value, h.key, h.owner)
		return err
	})
	var se *sessionError
	if errors.As(err, &se) {
		if errors.Is(se.err, errSessionDead) {
			return a.wentWithSession(ctx, nil) // dead before
		}
		return a.wentWithSession(ctx, se.err)
	}
	if err != nil {
		return drv.d.classify(ctx, "sql proclaim", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: this session no longer holds the lock, or the row no longer names this candidate", backends.ErrNotHeld)
	}
	return nil
}

// electHolders returns the candidacies among the holds, by acquisition id,
// with their values; nil on a table without the columns of elections.
func (drv *driver) electHolders(ctx context.Context) (map[string]string, error) {
	if drv.electErr != nil {
		return nil, nil
	}
	stmt := "elect_holders"
	if drv.cfg.mode != ModeLease {
		stmt = "advisory_elect_holders"
	}
	rows, err := drv.db.QueryContext(ctx, drv.st.get(stmt))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var (
			id    string
			value []byte
		)
		if err := rows.Scan(&id, &value); err != nil {
			return nil, err
		}
		out[id] = string(value)
	}
	return out, rows.Err()
}

// clearElect removes a force-released advisory candidacy's value from its
// row (its session was ended, which freed its lock; the row is no leader
// already, since its mark went with the session) and, on PostgreSQL,
// tells Observe.
func (drv *driver) clearElect(ctx context.Context, name, id string) error {
	args := []any{lockKey(name), id}
	if drv.notify == nil {
		_, err := drv.db.ExecContext(ctx, drv.st.get("advisory_elect_clear"), args...)
		return err
	}
	var n, woken int64
	return drv.db.QueryRowContext(ctx, drv.st.get("advisory_elect_clear"), append(args, drv.channel)...).Scan(&n, &woken)
}
