package mysqlpg

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// minTxNames is the fewest names MySQL's AcquireAll takes in one
// transaction: its four statements (begin, upsert, check, commit) are as
// many as four names' upserts one by one, and more for fewer names.
const minTxNames = 4

// maxAllNames bounds the names of one AcquireAll statement, well within
// both servers' limits on a statement's parameters (65,535).
const maxAllNames = 1000

// AcquireAll takes every name of reqs in one request in lease mode, or
// none: on PostgreSQL one statement (lease_acquire_all.sql), on MySQL one
// transaction of four statements, for four names or more. Each name's row
// is taken exactly as lease_acquire.sql takes it (the same lease on the
// database's clock, the same fencing counter), so each hold is the one
// Acquire would have returned.
//
// Advisory mode declines (ErrUnsupported): a Locker holds each name on the
// session its key maps to, so a set of names spans several sessions,
// which no one statement reaches.
func (drv *driver) AcquireAll(ctx context.Context, reqs []backends.Request) ([]backends.Hold, error) {
	switch {
	case drv.adv != nil:
		return nil, fmt.Errorf("%w: sql: LockAll in one request in advisory mode (names live on several sessions)", backends.ErrUnsupported)
	case len(reqs) > maxAllNames:
		return nil, fmt.Errorf("%w: sql: LockAll of more than %d names in one request", backends.ErrUnsupported, maxAllNames)
	case drv.d != postgres && len(reqs) < minTxNames:
		return nil, fmt.Errorf("%w: mysql: LockAll of fewer than %d names in one transaction (name by name takes fewer statements)",
			backends.ErrUnsupported, minTxNames)
	}
	hs := make([]*leaseHold, len(reqs))
	for i, req := range reqs {
		if req.TTL != reqs[0].TTL || req.Owner != reqs[0].Owner {
			return nil, fmt.Errorf("%w: sql: LockAll in one request with several leases or owners", backends.ErrUnsupported)
		}
		hs[i] = &leaseHold{drv: drv, key: lockKey(req.Name), owner: driverkit.NewID(), holder: req.Owner, ttl: req.TTL}
	}
	// Row-key order: every LockAll locks the rows it shares with another
	// in the same order.
	order := make([]int, len(hs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(hs[a].key, hs[b].key) })
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sent := time.Now()
	// As tryLease: detached from ctx, so that the outcome is known.
	dctx, cancel := drv.bound(context.WithoutCancel(ctx))
	defer cancel()
	var tokens map[string]uint64
	err := drv.retrying(func() error {
		var err error
		if drv.d == postgres {
			tokens, err = drv.acquireAllStatement(dctx, reqs, hs, order)
		} else {
			tokens, err = drv.acquireAllTx(dctx, reqs, hs, order)
		}
		return err
	})
	switch {
	case errors.Is(err, backends.ErrNotAcquired):
		return nil, err
	case drv.d.retryable(err):
		// Lost a race inside the server every time: nothing was taken.
		return nil, fmt.Errorf("%w: %w", backends.ErrNotAcquired, err)
	case err != nil:
		err = drv.d.classify(dctx, "sql acquire all", err)
		if errors.Is(err, backends.ErrUnavailable) {
			for _, h := range hs {
				drv.releaseLater(h) // the grant may have been applied
			}
		}
		return nil, err
	}
	out := make([]backends.Hold, len(hs))
	for i, h := range hs {
		h.token, h.grant = tokens[string(h.key)], backends.Grant{Sent: sent, TTL: h.ttl}
		out[i] = h
	}
	if err := ctx.Err(); err != nil {
		releases := make([]func(context.Context) error, len(hs))
		for i, h := range hs {
			releases[i] = h.Release
		}
		drv.janitor.SettleAll(releases...) // a CleanupWait in all, not one per name
		return nil, err
	}
	return out, nil
}

// acquireAllStatement is PostgreSQL's one statement. It returns the
// tokens by row key, or ErrNotAcquired when some name was held (the
// statement then undid what it took).
func (drv *driver) acquireAllStatement(ctx context.Context, reqs []backends.Request, hs []*leaseHold, order []int) (map[string]uint64, error) {
	keys, names, owners := make([][]byte, len(order)), make([]string, len(order)), make([]string, len(order))
	queues := make([]int64, len(order))
	for j, i := range order {
		keys[j], names[j], owners[j] = hs[i].key, reqs[i].Name, hs[i].owner
		queues[j] = drv.queueKey(reqs[i].Name).(int64)
	}
	rows, err := drv.db.QueryContext(ctx, drv.st.get("lease_acquire_all"),
		keys, names, owners, drv.host, drv.pid, hs[0].ttl.Microseconds(), holderArg(hs[0].holder), queues)
	if err != nil {
		return nil, notAllFree(err)
	}
	tokens, err := scanTokens(rows)
	switch {
	case err != nil:
		return nil, notAllFree(err)
	case len(tokens) == 0:
		return nil, backends.ErrNotAcquired
	case len(tokens) != len(hs):
		return nil, fmt.Errorf("sql acquire all: %d rows for %d names", len(tokens), len(hs))
	}
	return tokens, nil
}

// notAllFree turns the division by zero of lease_acquire_all.sql, which
// undid the statement because some name was held, into ErrNotAcquired.
func notAllFree(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "22012" {
		return backends.ErrNotAcquired
	}
	return err
}

// acquireAllTx is MySQL's one transaction: lease_acquire.sql's upsert of
// every row (the token it sets with LAST_INSERT_ID goes unread), then a
// count of the rows that name this call's ids while no name has a queue
// (queue.go); commit if that is all of them, roll back otherwise
// (ErrNotAcquired).
func (drv *driver) acquireAllTx(ctx context.Context, reqs []backends.Request, hs []*leaseHold, order []int) (map[string]uint64, error) {
	tx, err := drv.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	args := make([]any, 0, 7*len(order)+1)
	for _, i := range order {
		h := hs[i]
		args = append(args, h.key, reqs[i].Name, h.owner, drv.host, drv.pid, h.ttl.Microseconds(), holderArg(h.holder))
	}
	// No one queue to respect in the upsert: the check below looks at
	// every name's.
	args = append(args, nil)
	if _, err := tx.ExecContext(ctx, repeatRows(drv.st.get("lease_acquire:rows"), len(order)), args...); err != nil {
		return nil, err
	}
	keys, owners := make([][]byte, len(hs)), make([]string, len(hs))
	for i, h := range hs {
		keys[i], owners[i] = h.key, h.owner
	}
	check, args := drv.d.inArgs(drv.st.get("lease_acquire_all_check:rows"), args[:0], inList{"keys", keys}, inList{"owners", owners})
	for _, req := range reqs {
		args = append(args, drv.queueKey(req.Name))
	}
	rows, err := tx.QueryContext(ctx, repeatRows(check, len(reqs)), args...)
	if err != nil {
		return nil, err
	}
	tokens, err := scanTokens(rows)
	if err != nil {
		return nil, err
	}
	if len(tokens) != len(hs) {
		return nil, backends.ErrNotAcquired // the deferred Rollback undoes the rows taken
	}
	return tokens, tx.Commit()
}

// scanTokens reads (row key, token) rows and closes them.
func scanTokens(rows *sql.Rows) (map[string]uint64, error) {
	defer rows.Close()
	tokens := map[string]uint64{}
	for rows.Next() {
		var (
			key   []byte
			token uint64
		)
		if err := rows.Scan(&key, &token); err != nil {
			return nil, err
		}
		tokens[string(key)] = token
	}
	return tokens, rows.Err()
}

// holderArg is a reentrancy owner as a statement's argument: NULL without
// one.
func holderArg(holder string) any {
	if holder == "" {
		return nil
	}
	return []byte(holder)
}

// repeatRows replaces each {{rows:ITEM}} in stmt with n copies of ITEM
// joined by commas: a multi-row VALUES list, or a list of calls (MySQL's
// placeholders need no numbering).
func repeatRows(stmt string, n int) string {
	for {
		start := strings.Index(stmt, "{{rows:")
		if start < 0 {
			return stmt
		}
		end := strings.Index(stmt[start:], "}}")
		if end < 0 {
			panic("mysqlpg: {{rows: without }} in statement")
		}
		item := stmt[start+len("{{rows:") : start+end]
		stmt = stmt[:start] + strings.Repeat(item+", ", n-1) + item + stmt[start+end+2:]
	}
}
