package mysqlpg

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// Readers and permits in lease mode. Each holds a slot row of its own (its
// lease, token and identity); the name row keeps the writer and the
// fencing counter as before and, while readers or permits hold the name,
// belongs to their group: no owner, the group's kind and limit, and an
// expiry that is never sooner than that of its last live slot. A writer's
// upsert (lease_acquire.sql) takes a row only once it expired, so it waits
// for the group with the mutex's one statement, unchanged. Every reader's
// and permit's statement runs in one transaction that locks the name row
// first; slot rows are reused (the lowest free one), so a name has as many
// as it ever had holds at once.

// Kinds of a group or slot row.
const (
	kindReaders = "S"
	kindPermits = "P"
)

// slotKey is the row key of a name's slot i. A valid name has no NUL, so
// it never collides with a name's key.
func slotKey(name string, i int) []byte {
	sum := sha256.Sum256([]byte(name + "\x00slot\x00" + strconv.Itoa(i)))
	return sum[:]
}

// acquireShared takes a reader's or a permit's slot.
func (drv *driver) acquireShared(ctx context.Context, req backends.Request) (backends.Hold, error) {
	h := &leaseHold{drv: drv, key: lockKey(req.Name), name: req.Name, owner: driverkit.NewID(), holder: req.Owner,
		ttl: req.TTL, kind: kindPermits, limit: req.Limit}
	if req.Mode == backends.Shared {
		h.kind, h.limit = kindReaders, 1
	}
	var left time.Duration // until the soonest blocking hold may expire
	err := drv.acquireLoop(ctx, req, h.key,
		func() (ok bool, err error) {
			ok, left, err = drv.trySlot(ctx, h, req.Wait)
			return ok, err
		},
		func(w *waiter, attempt int) error { return drv.waitSlot(ctx, w, nil, req.Retry, attempt, left) })
	if err != nil {
		return nil, err
	}
	return h, nil
}

// trySlot runs the granting transaction once, detached from ctx and
// bounded by the request timeout, as tryLease runs its statement: a grant
// that arrives after the caller gave up is released, and one whose outcome
// is unknown is released in the background.
func (drv *driver) trySlot(ctx context.Context, h *leaseHold, wait bool) (bool, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return false, 0, err
	}
	sent := time.Now()
	dctx, cancel := drv.bound(context.WithoutCancel(ctx))
	defer cancel()
	var (
		ok   bool
		left time.Duration
	)
	release, err := drv.acquiring(dctx)
	if err != nil {
		return false, 0, drv.d.classify(dctx, "sql acquire", err)
	}
	defer release()
	err = drv.retrying(func() error {
		var err error
		ok, left, err = drv.slotTx(dctx, h, wait)
		return err
	})
	if errors.Is(err, backends.ErrInvalidOption) {
		return false, 0, err
	}
	if isLockTimeout(err) {
		// The server gave up waiting for the name row before the client
		// would have (grantSetup), and rolled the grant back: no answer
		// within the bound, and nothing to release.
		return false, 0, driverkit.Unavailable("sql acquire", fmt.Errorf("%w: the name's row stayed locked: %w", driverkit.ErrNoAnswer, err))
	}
	if err != nil {
		err = drv.d.classify(dctx, "sql acquire", err)
		if errors.Is(err, backends.ErrUnavailable) {
			// The commit went with the grant: it may have been applied,
			// whether or not an answer came, or be applied yet (on
			// MySQL it may still wait for the name row: the server goes
			// on with a script whose client gave up). The release finds
			// the slot by the acquisition id, after that grant.
			h.unanswered = true
			drv.janitor.Go(func(ctx context.Context) error { return drv.releaseSlot(ctx, h) })
		}
		return false, 0, err
	}
	if !ok {
		return false, left, nil
	}
	h.grant = backends.Grant{Sent: sent, TTL: h.ttl}
	if err := ctx.Err(); err != nil {
		drv.janitor.Settle(func(ctx context.Context) error { return h.Release(ctx) })
		return false, 0, err
	}
	return true, 0, nil
}

// nameRow is the name row as shared_lock.sql reads it.
type nameRow struct {
	owner    sql.NullString
	live     bool
	advisory bool
	kind     sql.NullString
	lim      sql.NullInt64
	slots    int
	left     time.Duration
	until    any // the expiry of a lease granted now, as the database wrote it
}

// writer reports whether a live writer holds the row; group whether a
// live group of readers or permits does, and with what limit.
func (r *nameRow) writer() bool { return r.live && r.owner.Valid }
func (r *nameRow) group() bool  { return r.live && !r.owner.Valid }
func (r *nameRow) limit() int {
	if r.lim.Valid {
		return int(r.lim.Int64)
	}
	return 1
}

// lockName locks and reads the name row in tx.
func (drv *driver) lockName(ctx context.Context, tx *sql.Tx, key []byte, ttl time.Duration) (*nameRow, error) {
	var (
		r  nameRow
		us int64
	)
	err := tx.QueryRowContext(ctx, drv.st.get("shared_lock"), ttl.Microseconds(), key).Scan(
		&r.owner, &r.live, &r.advisory, &r.kind, &r.lim, &r.slots, &us, &r.until)
	if err != nil {
		return nil, err
	}
	r.left = time.Duration(us) * time.Microsecond
	if b, ok := r.until.([]byte); ok {
		r.until = string(b) // MySQL's DATETIME as text, cast back by the statements
	}
	return &r, nil
}

// slotRow is one slot row as shared_slots.sql reads it.
type slotRow struct {
	owner sql.NullString
	live  bool
	left  time.Duration
}

// readSlots locks and reads a name's slot rows 0..n-1 in tx, by index.
func (drv *driver) readSlots(ctx context.Context, tx *sql.Tx, name string, n int) ([]slotRow, [][]byte, error) {
	keys := make([][]byte, n)
	out := make([]slotRow, n)
	if n == 0 {
		return out, keys, nil
	}
	index := map[string]int{}
	for i := range n {
		keys[i] = slotKey(name, i)
		index[string(keys[i])] = i
	}
	stmt, args := drv.d.inArgs(drv.st.get("shared_slots"), nil, inList{"keys", keys})
	rows, err := tx.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			key []byte
			s   slotRow
			us  int64
		)
		if err := rows.Scan(&key, &s.owner, &s.live, &us); err != nil {
			return nil, nil, err
		}
		s.left = time.Duration(us) * time.Microsecond
		if i, ok := index[string(key)]; ok {
			out[i] = s
		}
	}
	return out, keys, rows.Err()
}

// errAdvisoryName is the error for a name that advisory mode uses on the
// same table.
func (drv *driver) errAdvisoryName() error {
	return fmt.Errorf("%w: this name is held in advisory mode on table %s, and one table serves one mode",
		backends.ErrInvalidOption, drv.cfg.quotedTable())
}

// groupRow makes the locked name row its group's (shared_name.sql),
// moving the counter on by step, and returns the counter.
func (drv *driver) groupRow(ctx context.Context, tx *sql.Tx, key []byte, until any, kind string, limit, slots, step int) (uint64, error) {
	if drv.d.returning {
		var token int64
		err := tx.QueryRowContext(ctx, drv.st.get("shared_name"), kind, limit, slots, until, step, key).Scan(&token)
		return uint64(token), err
	}
	res, err := tx.ExecContext(ctx, drv.st.get("shared_name"), until, until, kind, limit, slots, step, key)
	if err != nil {
		return 0, err
	}
	id, err := res.LastInsertId()
	return uint64(id), err
}

// putSlot writes h's slot row (shared_slot.sql), the name's slot index.
// On MySQL the row keeps its index, by which a grant finds the lowest free
// slot (shared_grant.sql).
func (drv *driver) putSlot(ctx context.Context, tx *sql.Tx, h *leaseHold, token uint64, until any, index int) error {
	var holder any // NULL without an owner
	if h.holder != "" {
		holder = []byte(h.holder)
	}
	args := []any{h.slot, h.name, int64(token), h.owner, drv.host, drv.pid, holder, until, h.kind, h.limit, h.key}
	if drv.d == mysqlDialect {
		args = append(args, index)
	}
	_, err := tx.ExecContext(ctx, drv.st.get("shared_slot"), args...)
	return err
}

// waitSlot waits until a blocking hold may have ended: a release notice
// (PostgreSQL), the soonest blocking lease running out (left, by the
// database's clock; it looks a little after), or the next poll (MySQL, or
// PostgreSQL while its listener is reconnecting, on the backend's own
// schedule: WithRetry is for backends without push). A writer's wait
// (waitLease) and a reader's or permit's use it alike. It also ends when
// also closes (nil: never).
func (drv *driver) waitSlot(ctx context.Context, w *waiter, also <-chan struct{}, retry backends.Retry, attempt int, left time.Duration) error {
	delay := min(left, maxLeaseWait) + time.Millisecond
	var wake <-chan struct{}
	switch {
	case w != nil && w.listening():
		wake = w.c
	case w != nil:
		delay = min(delay, fallbackPoll.NextBackoff(attempt))
	default:
		poll := retry.NextBackoff(attempt)
		if poll < 0 {
			return backends.ErrNotAcquired
		}
		delay = min(delay, poll)
	}
	return sleepOr(ctx, delay, wake, also)
}

// writerMismatch checks a writer's refused upsert against the group that
// holds the name: a semaphore's permits are another limit.
func (drv *driver) writerMismatch(ctx context.Context, key []byte, name string) error {
	if drv.sharedErr != nil {
		return nil // no group can hold the name
	}
	var lim int64
	err := drv.db.QueryRowContext(ctx, drv.st.get("lease_limit"), key).Scan(&lim)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return drv.d.classify(ctx, "sql acquire", err)
	case lim != 1:
		return driverkit.LimitMismatch(name, int(lim), 1)
	}
	return nil
}
