package mysqlpg

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/padlock-go/padlock/driverkit"
)

// Readers' and permits' transactions in one round trip each. A grant is a
// transaction of several statements (make the name row, lock it, read the
// slots, decide, write the group's row and the slot's, commit), and so is
// a release (lock, free, settle, commit). Sent one statement at a time
// they cost seven and five round trips, four of them with the name row
// locked, so readers queued behind one another's round trips instead of
// sharing the name. Each now goes to the server in one piece: on
// PostgreSQL a pipeline (pgx's batch, one Sync) whose grant is one
// statement (shared_grant.sql), on MySQL a script of statements in one
// query (the rule on session variables). The name row is locked only while
// the server runs what follows the lock. The rule is that of the mutex's
// group row, as before: readers beside readers, never beside a live
// writer, at most lim permits, the lowest free slot.

// pipelined sends b (a transaction: BEGIN first, COMMIT last) on one
// pooled connection in one round trip and reads its results with read, in
// order. A statement that failed leaves the transaction aborted on the
// server; pipelined rolls it back, or closes the connection, before the
// connection goes back to the pool.
func (drv *driver) pipelined(ctx context.Context, b *pgx.Batch, read func(pgx.BatchResults) error) error {
	conn, err := drv.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("mysqlpg: a PostgreSQL connection of type %T, not pgx's", dc)
		}
		pc := sc.Conn()
		br := pc.SendBatch(ctx, b)
		err := read(br)
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if !pc.IsClosed() && pc.PgConn().TxStatus() != 'I' {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			if _, rerr := pc.Exec(rctx, "ROLLBACK"); rerr != nil {
				_ = pc.Close(rctx)
				return errors.Join(err, sqldriver.ErrBadConn)
			}
		}
		return err
	})
}

// genericPlans is the second statement of a reader's or permit's
// transaction on PostgreSQL: the grant (shared_grant.sql) and the release
// (shared_free.sql) run on plans made once per connection. Left to
// choose, the server planned the grant afresh at every call (1.4 ms,
// against 0.25 ms to run it; the release 0.5 against 0.2), and it plans
// after the statement before has locked the name row: every reader's grant
// and release waited for the others' planning. Measured with
// pg_stat_statements (track_planning) at 16 readers of one name: plans
// fell from one per call to one per connection.
const genericPlans = "SET LOCAL plan_cache_mode = force_generic_plan"

// boundedPlans is genericPlans for a granting transaction, which also
// bounds its waits for a row lock ($1, PostgreSQL's lock_timeout) by what
// is left of its request's time (grantSetup).
const boundedPlans = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('lock_timeout', $1, true)"

// grantSetup queues the second statement of a granting transaction on
// PostgreSQL: genericPlans, with the transaction's waits for the name
// row's lock bounded by what is left of ctx, less lockSlack. The whole
// pipeline, COMMIT included, is on the server once sent: a grant that
// waited for the row past the moment its client gave up (a stalled
// holder, an operator's lock) would commit afterwards, for nobody, and a
// reader's release in the background, which locks no name row, may have
// run before it and found nothing to free. With the bound, the server
// gives the wait up first and rolls the transaction back
// (TestGrantGivesUpWithItsClient).
func grantSetup(ctx context.Context, b *pgx.Batch) {
	end, ok := ctx.Deadline()
	if !ok {
		b.Queue(genericPlans)
		return
	}
	// lock_timeout 0 is no bound: a millisecond at least.
	ms := max(time.Until(end)-lockSlack, time.Millisecond).Milliseconds()
	b.Queue(boundedPlans, strconv.FormatInt(ms, 10)+"ms")
}

// lockSlack is how much sooner than its client a granting transaction
// gives up waiting for a row lock: the answer's way back, and the
// server's timer.
const lockSlack = 100 * time.Millisecond

// grantRow is what a pipelined grant answers (shared_grant.sql).
type grantRow struct {
	outcome string
	token   sql.NullInt64
	slot    []byte
	leftUS  int64
	lim     int64
}

// slotTx is one granting transaction for h (a reader or a permit), in one
// round trip: a pipelined transaction on PostgreSQL, a script on MySQL. It
// applies the grant rule to the name's live holds and, if it grants,
// takes the lowest free slot and the counter's next value. Not granted,
// it reports how long until the soonest hold that blocks it may expire.
func (drv *driver) slotTx(ctx context.Context, h *leaseHold, wait bool) (bool, time.Duration, error) {
	h.slot = nil
	var (
		g   grantRow
		err error
	)
	if drv.d.returning {
		err = drv.grantBatch(ctx, h, wait, &g)
	} else {
		var holder any // NULL without an owner
		if h.holder != "" {
			holder = []byte(h.holder)
		}
		err = drv.script(ctx, drv.st.get("shared_grant"), func(row *sql.Row) error {
			return row.Scan(&g.outcome, &g.token, &g.slot, &g.leftUS, &g.lim)
		}, h.key, []byte(h.name), h.kind, h.limit, h.ttl.Microseconds(), h.owner, drv.host, drv.pid, holder)
	}
	if err != nil {
		return false, 0, err
	}
	switch g.outcome {
	case "G":
		if !g.token.Valid || len(g.slot) == 0 {
			return false, 0, errors.New("mysqlpg: a reader's grant returned no token or slot")
		}
		h.slot, h.token = g.slot, uint64(g.token.Int64)
		return true, 0, nil
	case "A":
		return false, 0, drv.errAdvisoryName()
	case "M":
		return false, 0, driverkit.LimitMismatch(h.name, int(g.lim), h.limit)
	case "B":
		return false, time.Duration(g.leftUS) * time.Microsecond, nil
	}
	return false, 0, fmt.Errorf("mysqlpg: a reader's grant answered %q", g.outcome)
}

// grantBatch sends a grant's transaction on PostgreSQL. A permit's is the
// exclusive grant (exclusiveBatch). A reader joins a live group of readers
// where it can, so that readers do not queue for the name row's exclusive
// lock one behind another: its first round trip tries to join and, if the
// join did not grant, the exclusive grant without waiting for the row
// (joinOrGrantBatch), or, where its Locker's own release left the group
// empty last (freedGroups), the exclusive grant alone; if another
// transaction holds the row (likely a reader making the group, or readers
// joining it), it tries to join again (joinBatch); and last it waits for
// the row. Most readers take one round trip.
func (drv *driver) grantBatch(ctx context.Context, h *leaseHold, wait bool, g *grantRow) error {
	var holder any // NULL without an owner
	if h.holder != "" {
		holder = h.holder
	}
	if h.kind != kindReaders {
		return drv.exclusiveBatch(ctx, h, wait, holder, false, g)
	}
	defer func() {
		if g.outcome == "G" {
			drv.freed.remove(h.name)
		}
	}()
	first := drv.joinOrGrantBatch
	if drv.freed.has(h.name) {
		first = func(ctx context.Context, h *leaseHold, wait bool, holder any, g *grantRow) error {
			return drv.exclusiveBatch(ctx, h, wait, holder, true, g)
		}
	}
	if err := first(ctx, h, wait, holder, g); err != nil || g.outcome != "L" {
		return err
	}
	if joined, err := drv.joinBatch(ctx, h, holder, g); err != nil || joined {
		return err
	}
	return drv.exclusiveBatch(ctx, h, wait, holder, false, g)
}

// joinOrGrantBatch is a reader's first try, in one round trip: the join's
// transaction (joinBatch's) and, after its commit, the exclusive grant's
// without waiting for the row (exclusiveBatch's with skip), whose lock is
// taken only if the join did not grant (shared_hold_unjoined.sql). Where
// the group is gone (its last reader left and freed the name) the reader
// makes it again in the same round trip. g is the exclusive grant's if it
// granted, else the join's if it granted, else the exclusive grant's
// answer.
//
// A join whose commit was answered stands whatever happens to the
// transaction after it: an error there (its wait for the name row timed
// out, a broken connection) changed nothing, since a joined acquisition
// takes no lock there and its grant grants nothing. Reported as the
// batch's error, the join's slot would have had nobody to release it for
// a lease (found in a review). The exclusive grant does grant after a
// join in one case: the joined slot was force-released before its check,
// and the grant is then the acquisition's, made after that release.
func (drv *driver) joinOrGrantBatch(ctx context.Context, h *leaseHold, wait bool, holder any, g *grantRow) error {
	b := &pgx.Batch{}
	drv.queueJoin(ctx, b, h, holder)
	drv.queueExclusive(ctx, b, h, wait, holder, lockUnjoined)
	var (
		joined    grantRow
		committed bool // the join's COMMIT was answered
		granted   bool // the exclusive grant granted, and its COMMIT was answered
	)
	err := drv.pipelined(ctx, b, func(br pgx.BatchResults) error {
		if err := scanAfter(br, 3, &joined.token, &joined.slot); err != nil {
			return err
		}
		if _, err := br.Exec(); err != nil {
			return err
		}
		committed = true
		if err := scanAfter(br, 4, &g.outcome, &g.token, &g.slot, &g.leftUS, &g.lim); err != nil {
			return err
		}
		if _, err := br.Exec(); err != nil {
			return err
		}
		granted = g.outcome == "G"
		return nil
	})
	switch {
	case granted:
		return nil
	case committed && joined.token.Valid:
		*g = joined
		g.outcome = "G"
		return nil
	}
	return err
}

// exclusiveBatch sends the exclusive grant's transaction (shared_grant.sql)
// in one round trip: it locks the name row first, or, with skip, tries to
// and answers L if another transaction holds it.
func (drv *driver) exclusiveBatch(ctx context.Context, h *leaseHold, wait bool, holder any, skip bool, g *grantRow) error {
	how := lockWait
	if skip {
		how = lockSkip
	}
	b := &pgx.Batch{}
	drv.queueExclusive(ctx, b, h, wait, holder, how)
	return drv.pipelined(ctx, b, func(br pgx.BatchResults) error {
		if err := scanAfter(br, 4, &g.outcome, &g.token, &g.slot, &g.leftUS, &g.lim); err != nil {
			return err
		}
		_, err := br.Exec()
		return err
	})
}

// exclusiveLock is how an exclusive grant's transaction takes the name
// row.
type exclusiveLock int

const (
	lockWait     exclusiveLock = iota // waits for it (shared_hold.sql)
	lockSkip                          // or skips it (shared_hold_skip.sql)
	lockUnjoined                      // skips it, and takes it only if the join before did not grant
)

// queueExclusive queues the exclusive grant's transaction: the name row
// made if it is not there, locked as how says, and the grant.
func (drv *driver) queueExclusive(ctx context.Context, b *pgx.Batch, h *leaseHold, wait bool, holder any, how exclusiveLock) {
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	grantSetup(ctx, b)
	switch how {
	case lockUnjoined:
		b.Queue(drv.st.get("shared_ensure_unjoined"), h.key, h.name, h.owner)
		b.Queue(drv.st.get("shared_hold_unjoined"), h.key, h.owner)
	case lockSkip:
		b.Queue(drv.st.get("shared_ensure"), h.key, h.name)
		b.Queue(drv.st.get("shared_hold_skip"), h.key)
	default:
		b.Queue(drv.st.get("shared_ensure"), h.key, h.name)
		b.Queue(drv.st.get("shared_hold"), h.key)
	}
	b.Queue(drv.st.get("shared_grant"), h.key, []byte(h.name), h.kind, h.limit, h.ttl.Microseconds(),
		wait && drv.notify != nil, h.owner, drv.host, drv.pid, holder, h.name)
	b.Queue("COMMIT")
}

// queueJoin queues a reader's join's transaction: the name row held FOR
// KEY SHARE (shared_share.sql), and the join (shared_join.sql).
func (drv *driver) queueJoin(ctx context.Context, b *pgx.Batch, h *leaseHold, holder any) {
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	grantSetup(ctx, b)
	b.Queue(drv.st.get("shared_share"), h.key)
	b.Queue(drv.st.get("shared_join"), h.key, h.ttl.Microseconds(), h.owner, drv.host, drv.pid, holder, h.name, []byte(h.name))
	b.Queue("COMMIT")
}

// joinBatch sends a reader's join (shared_join.sql) in one round trip: a
// transaction that holds the name row FOR KEY SHARE, so that readers
// joining a live group do not queue for its exclusive lock, and a waiting
// writer's upsert and mark, which update the row, do not queue for theirs
// (shared_share.sql). It reports whether the
// reader joined; if so, g is its grant.
func (drv *driver) joinBatch(ctx context.Context, h *leaseHold, holder any, g *grantRow) (bool, error) {
	b := &pgx.Batch{}
	drv.queueJoin(ctx, b, h, holder)
	err := drv.pipelined(ctx, b, func(br pgx.BatchResults) error {
		if err := scanAfter(br, 3, &g.token, &g.slot); err != nil {
			return err
		}
		_, err := br.Exec()
		return err
	})
	if err != nil || !g.token.Valid {
		return false, err
	}
	g.outcome = "G"
	return true, nil
}

// leaveBatch is a reader's release on PostgreSQL, in one round trip: a
// transaction that frees the reader's slot and locks nothing else
// (shared_leave.sql); then, in a transaction of its own, the group's row
// is freed if no reader is left, or its lease cut back to its readers' if
// the reader that left had renewed it past theirs (shared_last.sql,
// shared_vacate.sql). It reports the slots freed.
func (drv *driver) leaveBatch(ctx context.Context, h *leaseHold) (int64, error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	b.Queue(genericPlans)
	b.Queue(drv.st.get("shared_leave"), h.key, h.owner, drv.channel)
	b.Queue("COMMIT")
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	b.Queue(genericPlans)
	b.Queue(drv.st.get("shared_last"), h.key, h.ttl.Microseconds())
	b.Queue(drv.st.get("shared_vacate"), h.key, drv.channel)
	b.Queue("COMMIT")
	var (
		freed int64
		left  bool // the first transaction committed: the slot is free
	)
	err := drv.pipelined(ctx, b, func(br pgx.BatchResults) error {
		var woken int64
		if err := scanAfter(br, 2, &freed, &woken); err != nil {
			return err
		}
		if _, err := br.Exec(); err != nil {
			return err
		}
		left = true
		var free bool
		if err := scanAfter(br, 3, &free, &woken); err != nil { // after BEGIN, SET LOCAL, the lock
			return err
		}
		if free {
			drv.freed.add(h.name)
		}
		_, err := br.Exec()
		return err
	})
	if left && err != nil {
		// The release stands; only the group's row was not freed (or
		// cut back): it expires with its own lease instead.
		return freed, nil
	}
	return freed, err
}

// scanAfter reads a batch's results up to its one row: n statements whose
// results say nothing but their errors (BEGIN, SET LOCAL, locks), then
// the row, into dest.
func scanAfter(br pgx.BatchResults, n int, dest ...any) error {
	for range n {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	return br.QueryRow().Scan(dest...)
}

// freedGroups are the names whose group of readers this Locker's own
// release freed last (its reader left it empty): its next reader there
// tries the exclusive grant first, alone, since a join would find no
// group. Any grant of a reader on the name clears it. A hint only saves a
// transaction; a stale one costs a round trip. Bounded: past maxGroupHints
// names it starts again.
type freedGroups struct {
	mu    sync.Mutex
	names map[string]struct{}
}

const maxGroupHints = 4096

func (fg *freedGroups) has(name string) bool {
	fg.mu.Lock()
	defer fg.mu.Unlock()
	_, ok := fg.names[name]
	return ok
}

func (fg *freedGroups) add(name string) {
	fg.mu.Lock()
	defer fg.mu.Unlock()
	if fg.names == nil || len(fg.names) >= maxGroupHints {
		fg.names = map[string]struct{}{}
	}
	fg.names[name] = struct{}{}
}

func (fg *freedGroups) remove(name string) {
	fg.mu.Lock()
	defer fg.mu.Unlock()
	delete(fg.names, name)
}

// releaseTx is releaseSlot's transaction, in one round trip. It finds the
// slot by the acquisition id, so it also frees a grant whose answer was
// lost.
func (drv *driver) releaseTx(ctx context.Context, h *leaseHold) error {
	var freed int64
	var err error
	if drv.d.returning && h.kind == kindReaders {
		freed, err = drv.leaveBatch(ctx, h)
	} else if drv.d.returning {
		b := &pgx.Batch{}
		b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
		b.Queue(genericPlans)
		b.Queue(drv.st.get("shared_hold"), h.key)
		b.Queue(drv.st.get("shared_free"), h.key, h.owner, drv.channel)
		b.Queue("COMMIT")
		err = drv.pipelined(ctx, b, func(br pgx.BatchResults) error {
			var woken int64
			if err := scanAfter(br, 3, &freed, &woken); err != nil {
				return err
			}
			_, err := br.Exec()
			return err
		})
	} else if h.kind == kindReaders && !h.unanswered {
		// A reader's release leaves without the name row's lock, but not
		// after a grant whose answer never came: that grant may still be
		// waiting for the row, and a release that did not queue behind it
		// would find nothing, and leave it a reader that nobody holds.
		freed, err = drv.leaveScript(ctx, h)
	} else {
		err = drv.script(ctx, drv.st.get("shared_free"), func(row *sql.Row) error { return row.Scan(&freed) },
			h.key, h.owner)
	}
	if err == nil && freed == 0 {
		return errSlotGone
	}
	return err
}

// leaveScript is a reader's release on MySQL, in one round trip: a
// transaction that frees the reader's slot and locks nothing else, then,
// only if the group's row outlasts its live slots by more than a quarter
// of the reader's lease (none is left, or the reader had renewed it past
// the others'), one that locks the name row and makes it expire with its
// last live slot, or frees it (shared_leave.sql). It reports the slots
// freed. An error after the first transaction committed leaves the
// release standing (the session's @padlock_freed says so): only the
// group's row was not freed or cut back, and it expires with its own
// lease instead.
func (drv *driver) leaveScript(ctx context.Context, h *leaseHold) (int64, error) {
	var freed int64
	stood := func(ctx context.Context, conn *sql.Conn, err error) error {
		var (
			n    sql.NullInt64
			left sql.NullString
		)
		if conn.QueryRowContext(ctx, "SELECT @padlock_freed, @padlock_left").Scan(&n, &left) == nil &&
			n.Valid && n.Int64 > 0 && left.Valid && left.String == h.owner {
			freed = n.Int64
			return nil
		}
		return err
	}
	var slot any // NULL: found by the acquisition id
	if len(h.slot) > 0 {
		slot = h.slot
	}
	err := drv.scriptThen(ctx, drv.st.get("shared_leave"), func(row *sql.Row) error { return row.Scan(&freed) }, stood,
		h.key, h.owner, slot, (h.ttl / 4).Microseconds())
	return freed, err
}

// script runs a MySQL script (statements that go together, the arguments
// in the first; the connection allows several statements per query) on
// one pooled connection and scans the one row of its last statement. A
// statement that fails may leave the script's transaction open: script
// rolls it back, or drops the connection, before it goes back to the pool.
func (drv *driver) script(ctx context.Context, text string, scan func(*sql.Row) error, args ...any) error {
	return drv.scriptThen(ctx, text, scan, nil, args...)
}

// scriptThen is script, and after a failed script that it rolled back it
// asks the connection what the script got done (after, if not nil,
// whose answer is the call's error: the session's variables are still
// the script's).
func (drv *driver) scriptThen(ctx context.Context, text string, scan func(*sql.Row) error,
	after func(context.Context, *sql.Conn, error) error, args ...any) error {
	conn, err := drv.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	err = scan(conn.QueryRowContext(ctx, text, args...))
	if err == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if _, rerr := conn.ExecContext(rctx, "ROLLBACK"); rerr != nil {
		_ = conn.Raw(func(any) error { return sqldriver.ErrBadConn })
		return err
	}
	if after != nil {
		return after(rctx, conn, err)
	}
	return err
}
