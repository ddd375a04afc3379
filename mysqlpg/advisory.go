package mysqlpg

import (
	"context"
	"crypto/sha256"
	"database/sql"
	sqldriver "database/sql/driver"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// advisory is advisory mode: the database's own locks, held on a few
// long-lived sessions (pinned connections) per Locker. A name always maps
// to the same session, so a Locker holds any number of names on
// pool_max_conns connections. Advisory locks are reentrant per session, so
// a Locker also keeps its own table of the names it holds: a second
// acquisition of a held name waits for the first locally, never asking the
// server (which would grant it twice).
type advisory struct {
	drv *driver

	opening []chan struct{} // per slot, capacity 1: one acquisition opens its session

	mu       sync.Mutex
	sessions []*session
	local    map[string]*localName // names held or asked for, by row key (hex)
	closed   bool
}

// session is one pinned connection and the locks it holds.
type session struct {
	mu     sync.Mutex // one statement at a time
	conn   *sql.Conn
	idle   time.Duration // the idle timeout set on the server
	dead   bool          // the connection failed: its locks are gone
	holds  int
	mark   any             // the session's mark (elect.go), once a candidacy took it; nil before
	lost   context.Context // cancelled when the session ends
	cancel context.CancelCauseFunc
	// stmts are the statements prepared on conn (MySQL: preparedOn), under
	// mu. They live as long as conn, which a session never gives back to
	// the pool (killLocked drops it): the server frees a connection's
	// statements when it ends.
	stmts map[string]*sql.Stmt
}

func newAdvisory(drv *driver) *advisory {
	n := drv.cfg.pool
	opening := make([]chan struct{}, n)
	for i := range opening {
		opening[i] = make(chan struct{}, 1)
	}
	return &advisory{drv: drv, opening: opening, sessions: make([]*session, n), local: map[string]*localName{}}
}

// advHold is one advisory-mode acquisition.
type advHold struct {
	a        *advisory
	s        *session
	key      []byte // row key
	advKey   any    // the server's lock key: int64 on PostgreSQL, a name on MySQL
	owner    string
	holder   any // the reentrancy owner ([]byte), or nil: recorded for Holders
	token    uint64
	ttl      time.Duration
	grant    backends.Grant
	released sync.Once
	elect    bool   // a candidacy in an election (elect.go)
	value    string // its first value, written by its acquisition
	// queueID is, on MySQL, the id of the queue connection by which a
	// waiting writer heads the name's queue (queue.go), while it does; 0
	// outside the queue. A writer's try takes the lock only for the head.
	queueID int64
	// queueHead is, on PostgreSQL, set while the writer heads the name's
	// queue (queue_pg_advisory.go): its try skips the queue's check.
	queueHead bool
	// Readers and permits (advisory_shared.go):
	name    string    // the lock's name
	kind    localKind // localWriter, localReader or localPermit
	limit   int       // a permit's limit
	row     []byte    // a reader's or permit's own row
	slotKey any       // a permit's slot lock
	slotLoc string    // and its claim in the local table
}

func (h *advHold) Token() uint64 { return h.token }

// Follows implements backends.Successor, as leaseHold does: a grant that
// takes the name row takes its counter up by one.
func (h *advHold) Follows() (uint64, bool) { return h.token - 1, h.token > 1 }
func (h *advHold) Grant() backends.Grant   { return h.grant }

// advisoryKey derives the server's lock key for a name. Advisory locks are
// per database on PostgreSQL and per server on MySQL, so the key covers the
// table's identity (database, schema and name as the server knows them). PostgreSQL takes 64 bits; MySQL a name of at
// most 64 characters, "padlock:" and 56 hex digits (224 bits).
func (a *advisory) advisoryKey(name string) any {
	sum := sha256.Sum256([]byte(a.drv.ident + "\x00" + name))
	if a.drv.d == postgres {
		return int64(binary.BigEndian.Uint64(sum[:8]))
	}
	return "padlock:" + hex.EncodeToString(sum[:28])
}

func (a *advisory) acquire(ctx context.Context, req backends.Request) (backends.Hold, error) {
	h := &advHold{a: a, key: lockKey(req.Name), advKey: a.advisoryKey(req.Name), owner: driverkit.NewID(), ttl: req.TTL,
		elect: req.Elect, value: req.Value, name: req.Name}
	if req.Owner != "" {
		h.holder = []byte(req.Owner)
	}
	if req.Mode == backends.Shared || req.Limit > 1 {
		return a.acquireShared(ctx, h, req)
	}
	local := hex.EncodeToString(h.key)
	if err := a.takeLocal(ctx, local, req.Name, localWriter, 1, req.Wait); err != nil {
		return nil, err
	}
	var (
		hold backends.Hold
		err  error
	)
	switch {
	case a.drv.queuedAdvisoryPG(req):
		// PostgreSQL: wait in the name's queue (queue_pg_advisory.go).
		err = a.acquireQueuedPG(ctx, h, req)
		hold = h
	case a.drv.queued(req):
		// MySQL: wait in the name's queue (queue.go); the tries run on
		// the name's session, for the queue's head.
		err = a.drv.acquireQueued(ctx, req, func(ctx context.Context, _ *sql.Conn, qid int64) (bool, error) {
			h.queueID = qid
			return a.gated(ctx, func(ctx context.Context) (bool, error) { return a.try(ctx, h, req.Name) })
		}, nil, func(ctx context.Context, qc *sql.Conn, qid int64) (bool, error) {
			// The queue's head, refused: wait on the server for the
			// holder's release, rather than poll for it.
			return a.drv.waitReleased(ctx, qc, qid, h.advKey)
		})
		h.queueID = 0
		hold = h
	default:
		hold, err = a.acquireServer(ctx, h, req, func() (bool, error) {
			return a.gated(ctx, func(ctx context.Context) (bool, error) { return a.try(ctx, h, req.Name) })
		})
	}
	if err != nil {
		a.freeLocal(local, localWriter)
		return nil, err
	}
	return hold, nil
}

// acquireServer asks the server until it grants the name. On PostgreSQL a
// release NOTIFY wakes the waiter; a holder whose connection died was
// never announced, so waiters also poll: on the backend's own fallback
// schedule when NOTIFY wakes them, on the caller's WithRetry on MySQL.
func (a *advisory) acquireServer(ctx context.Context, h *advHold, req backends.Request, try func() (bool, error)) (backends.Hold, error) {
	var said time.Time // when this waiter last said it waits
	err := a.drv.acquireLoop(ctx, req, h.key, try,
		func(w *waiter, attempt int) error {
			if w != nil && time.Since(said) > interestRefresh {
				// Say that we wait, then look again at once: a release
				// before this sent no NOTIFY, and one after it will.
				said = time.Now()
				return a.sayWaiting(ctx, h)
			}
			retry := req.Retry
			var wake <-chan struct{}
			if w != nil {
				retry, wake = fallbackPoll, w.c
			}
			delay := retry.NextBackoff(attempt)
			if delay < 0 {
				return backends.ErrNotAcquired
			}
			return sleep(ctx, delay, wake)
		})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// fallbackPoll paces the polls of waiters that a NOTIFY wakes: they poll
// only for holders that died without a release.
var fallbackPoll = backends.ExponentialBackoff(20*time.Millisecond, time.Second)

// interestRefresh is how often a PostgreSQL waiter renews its note that
// it waits (which lasts five seconds).
const interestRefresh = 2500 * time.Millisecond

// slot is the session slot of a name.
func (a *advisory) slot(key []byte) int {
	return int(binary.BigEndian.Uint32(key[:4]) % uint32(len(a.opening)))
}

// onSession runs f on the session of key, holding the session's lock, with
// a context detached from ctx and bounded by the request timeout: a
// statement cut short by the caller would make the driver drop the
// connection, and with it every lock it holds. If f fails for the
// connection's sake, the session ends (its holds are told at once); if it
// held nothing, f runs once more on a fresh session, since the server
// ends idle sessions on its own.
func (a *advisory) onSession(ctx context.Context, key []byte, ttl time.Duration, f func(ctx context.Context, s *session) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for retry := 0; ; retry++ {
		s, err := a.session(ctx, a.slot(key), ttl)
		if err == nil {
			err = s.run(ctx, a.drv, f)
		}
		var se *sessionError
		if err == nil || !errors.As(err, &se) {
			return err
		}
		if !se.empty || retry > 0 {
			return se.err
		}
	}
}

// sessionError is a failure that ended a session; empty says whether it
// held nothing.
type sessionError struct {
	err   error
	empty bool
}

func (e *sessionError) Error() string { return e.err.Error() }
func (e *sessionError) Unwrap() error { return e.err }

// run runs f on s as onSession describes.
func (s *session) run(ctx context.Context, drv *driver, f func(ctx context.Context, s *session) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	empty := s.holds == 0
	if s.dead {
		return &sessionError{driverkit.Unavailable("sql session", errSessionDead), empty}
	}
	dctx, cancel := drv.bound(context.WithoutCancel(ctx))
	defer cancel()
	if dctx.Err() != nil {
		// The attempt's bound passed while the session ran others'
		// statements: nothing was sent, so the session is as it was and
		// its holds stay; this attempt gives up unanswered.
		return driverkit.Unavailable("sql session", fmt.Errorf("%w: the session was busy with other statements for the whole request bound", driverkit.ErrNoAnswer))
	}
	err := f(dctx, s)
	if err == nil {
		return nil
	}
	cerr := drv.d.classify(dctx, "sql", err)
	if !errors.Is(cerr, backends.ErrUnavailable) {
		return err // refused by the server; the connection is fine
	}
	s.killLocked(err)
	return &sessionError{err, empty}
}

// sayWaiting notes in the name's row that someone waits for it, so that
// its release sends a NOTIFY.
func (a *advisory) sayWaiting(ctx context.Context, h *advHold) error {
	err := a.onSession(a.drv.attempt(ctx), h.key, h.ttl, func(ctx context.Context, s *session) error {
		_, err := s.conn.ExecContext(ctx, a.drv.st.get("advisory_wait"), h.key)
		return err
	})
	return a.drv.d.classify(ctx, "sql wait", err)
}

// try asks the server once, on the name's session. The statement runs
// detached from ctx, so that a grant is never left behind: one that
// arrives after the caller gave up is unlocked at once.
func (a *advisory) try(ctx context.Context, h *advHold, name string) (bool, error) {
	var ok, left bool
	err := a.onSession(ctx, h.key, h.ttl, func(dctx context.Context, s *session) error {
		sent := time.Now()
		token, got, err := a.tryOn(dctx, s, h, name)
		if errors.Is(err, errGateBusy) {
			return err // refused by the gate (MySQL): the name's lock is released
		}
		if err != nil || (got && ctx.Err() != nil) {
			// The lock may be held by s with nobody to release it (a
			// session-level advisory lock outlives a failed statement):
			// undo it, or end s, which frees every lock it has. A
			// candidacy's undo is its release, which also takes its value
			// off the row and (PostgreSQL) tells Observe, as the grant did.
			var uerr error
			if h.elect {
				var was sql.NullBool
				uerr = a.releaseElectOn(dctx, s, h, &was)
			} else {
				uerr = a.unlock(dctx, s, h.advKey)
			}
			if uerr != nil {
				s.killLocked(uerr)
			}
			if errors.Is(err, errNoCounter) {
				return errLeaseRow
			}
			left = err == nil
			return err
		}
		if got {
			s.holds++
			h.s, h.token, h.grant, ok = s, token, backends.Grant{Sent: sent, TTL: h.ttl}, true
			return nil
		}
		// Refused: by a writer or readers (a wait), or by permits, whose
		// limit is not a plain lock's (the limit rule's error).
		return a.limitsOn(dctx, s, h, name, kindReaders, 1)
	})
	if left {
		return false, ctx.Err() // the caller gave up; the grant was undone
	}
	if errors.Is(err, backends.ErrInvalidOption) || errors.Is(err, errGateBusy) {
		return false, err // the limit rule's, or the row's (errLeaseRow); or gated tries again
	}
	return ok, a.drv.d.classify(ctx, "sql acquire", err)
}

// errNoCounter means the advisory lock was granted but the row refused the
// grant: undone, and reported as errLeaseRow.
var errNoCounter = errors.New("advisory lock granted, counter not updated")

// tryOn runs the acquisition statements on s, whose lock the caller holds.
// A candidacy's are the same statements (advisory_elect_acquire), which
// also write its value and its session's mark into the row.
func (a *advisory) tryOn(ctx context.Context, s *session, h *advHold, name string) (token uint64, ok bool, err error) {
	drv := a.drv
	stmt := "advisory_acquire"
	pgArgs := []any{h.advKey, h.key, name, h.owner, drv.host, drv.pid, h.holder}
	if !h.elect {
		var q any // the queue to respect (queue_pg_advisory.go): none for its head
		if !h.queueHead {
			q = drv.queueKey(name)
		}
		pgArgs = append(pgArgs, q)
	}
	myArgs := []any{h.key, name, h.owner, drv.host, drv.pid, h.advKey, h.holder}
	if h.elect {
		if err := a.markOn(ctx, s); err != nil {
			return 0, false, err
		}
		stmt = "advisory_elect_acquire"
		pgArgs = append(pgArgs, []byte(h.value), s.mark, drv.channel)
		myArgs = append(myArgs, h.owner, []byte(h.value), s.mark)
	}
	if drv.d == postgres {
		var (
			got bool
			tok sql.NullInt64
		)
		// A statement the server asks to run again (a deadlock or a
		// serialization failure, in the row's upsert) is rolled back, but
		// the session's advisory lock it took is not: session-level
		// advisory locks ignore transactions. It is let go before the
		// statement runs again, which would otherwise take it a second
		// time, so that one unlock at the release would leave the name
		// held by this session (TestPostgresAdvisoryRetryTakesLockOnce).
		err = drv.retrying(func() error {
			err := queryRow(ctx, drv.d, s.conn, drv.st.get(stmt), pgArgs, &got, &tok)
			if err != nil && drv.d.retryable(err) {
				if uerr := a.unlock(ctx, s, h.advKey); uerr != nil {
					return uerr
				}
			}
			return err
		})
		switch {
		case err != nil:
			return 0, false, err
		case got && !tok.Valid:
			return 0, false, errNoCounter
		}
		return uint64(tok.Int64), got, nil
	}
	upsert := func() (token uint64, ok bool, err error) {
		err = drv.retrying(func() error {
			var err error
			token, ok, err = upsertOn(ctx, drv.d, s.conn, drv.st.get(stmt), myArgs...)
			return err
		})
		return token, ok, err
	}
	if h.elect {
		var got sql.NullInt64
		if err := s.conn.QueryRowContext(ctx, drv.st.get("advisory_try"), h.advKey).Scan(&got); err != nil {
			return 0, false, err
		}
		if !got.Valid || got.Int64 != 1 {
			return 0, false, nil
		}
		token, ok, err = upsert()
	} else {
		// A writer respects the name's queue (queue.go), and takes the
		// lock and its row in one round trip.
		var granted bool
		token, ok, granted, err = a.tryAcquireOn(ctx, s, h, name, myArgs)
		if err != nil || ok || !granted {
			return token, ok, err
		}
		// Granted, the row left alone: readers or permits, or a row
		// that is not advisory mode's for this client.
	}
	if err == nil && !ok && drv.sharedAdvisory() {
		return a.writerGroupOn(ctx, s, h, name, upsert) // readers or permits may hold the name
	}
	if err == nil && !ok {
		err = errNoCounter
	}
	return token, ok, err
}

// tryAcquireOn runs a MySQL writer's try and its row's upsert in one
// statement on s (advisory_try_acquire.sql): ok with the token when both
// took; granted when the lock was taken but the row left alone, which the
// caller then holds. A statement the server asks to run again (a
// deadlock) runs again once the lock it may have taken is let go, so
// that GET_LOCK, which counts, never holds the name twice.
func (a *advisory) tryAcquireOn(ctx context.Context, s *session, h *advHold, name string, rowArgs []any) (token uint64, ok, granted bool, err error) {
	drv := a.drv
	args := append(slices.Clip(rowArgs), drv.queueKey(name), h.queueID, h.queueID, h.advKey)
	var res sql.Result
	err = drv.retrying(func() error {
		var err error
		res, err = s.preparedOn(ctx, drv, "advisory_try_acquire").ExecContext(ctx, drv.st.get("advisory_try_acquire"), args...)
		if err != nil && drv.d.retryable(err) {
			if uerr := a.unlock(ctx, s, h.advKey); uerr != nil {
				return uerr
			}
		}
		return err
	})
	if err != nil {
		return 0, false, false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, false, false, err
	}
	id, err := res.LastInsertId()
	switch {
	case err != nil:
		return 0, false, false, err
	case n == 1:
		return 1, true, true, nil
	case n == 2:
		return uint64(id), true, true, nil
	}
	return 0, false, id == 1, nil
}

// errLeaseRow is the error when the name's row refuses an advisory grant:
// a lease-mode client holds it on the same table (one table serves one
// mode), or its advisory key is not this client's.
var errLeaseRow = fmt.Errorf("%w: a lease-mode client holds this name on the same table (one table serves one mode), or the row's advisory key differs from this client's", backends.ErrInvalidOption)

// errSessionDead is the cause when a holding session's connection failed.
var errSessionDead = errors.New("the holding connection failed, and the server freed its locks")

// unlock releases key on s, whose lock the caller holds, if s holds it.
func (a *advisory) unlock(ctx context.Context, s *session, key any) error {
	var ok sql.NullBool // false or NULL: s did not hold it, which is fine too
	return queryRow(ctx, a.drv.d, s.conn, a.drv.st.get("advisory_unlock"), []any{key}, &ok)
}

// session returns the live session in slot idx, opening one if the slot is
// empty or its session died, with an idle timeout of at least ttl. (Lock
// order: a session's mu may be held while taking a.mu, never the reverse.)
func (a *advisory) session(ctx context.Context, idx int, ttl time.Duration) (*session, error) {
	drv := a.drv
	current := func() (*session, error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.closed {
			return nil, fmt.Errorf("mysqlpg: %w", backends.ErrClosed)
		}
		return a.sessions[idx], nil
	}
	s, err := current()
	if err != nil {
		return nil, err
	}
	if s == nil || s.isDead() {
		// One opener per slot: the pool has one connection per slot, and
		// acquisitions racing to open the same slot would wait for ever
		// for a connection that the winner pinned.
		// The wait for another opener and the opening share one request
		// bound: behind an opener on a silent path, each caller used to
		// wait for the one before it and then for its own dial, and
		// calls on one slot took a bound each, one after another
		// (ServerSilent's Lock took 17s against its 15s bound).
		qctx, cancel := drv.bound(ctx)
		defer cancel()
		select {
		case a.opening[idx] <- struct{}{}:
		case <-qctx.Done():
			return nil, drv.d.classify(qctx, "sql session", context.Cause(qctx))
		}
		defer func() { <-a.opening[idx] }()
		if s, err = current(); err != nil {
			return nil, err
		}
		if s == nil || s.isDead() {
			if s != nil {
				s.close() // make sure its connection is back in the pool
			}
			conn, err := drv.db.Conn(qctx)
			err = drv.d.classify(qctx, "sql session", err)
			if err != nil {
				return nil, err
			}
			s = newSession(conn)
			a.mu.Lock()
			closed := a.closed
			if !closed {
				a.sessions[idx] = s
			}
			a.mu.Unlock()
			if closed {
				s.close()
				return nil, fmt.Errorf("mysqlpg: %w", backends.ErrClosed)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return nil, &sessionError{driverkit.Unavailable("sql session", errSessionDead), s.holds == 0}
	}
	if s.idle < ttl {
		dctx, cancel := drv.bound(context.WithoutCancel(ctx))
		defer cancel()
		if _, err := s.conn.ExecContext(dctx, drv.st.get("advisory_setup"), drv.d.idleTimeout(ttl)); err != nil {
			cerr := drv.d.classify(dctx, "sql session", err)
			if !errors.Is(cerr, backends.ErrUnavailable) {
				return nil, cerr
			}
			s.killLocked(err)
			return nil, &sessionError{cerr, s.holds == 0}
		}
		s.idle = ttl
	}
	return s, nil
}

func newSession(conn *sql.Conn) *session {
	lost, cancel := context.WithCancelCause(context.Background())
	return &session{conn: conn, lost: lost, cancel: cancel}
}

func (s *session) isDead() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead
}

// killLocked ends s, whose mu the caller holds: its connection is closed,
// which frees its locks on the server, and its holds are told at once
// (their Lost context ends with cause).
func (s *session) killLocked(cause error) {
	if s.dead {
		return
	}
	s.dead = true
	s.cancel(fmt.Errorf("%w: %w", errSessionDead, cause))
	// Make database/sql drop the connection instead of pooling it.
	s.conn.Raw(func(any) error { return sqldriver.ErrBadConn })
	s.conn.Close()
}

// Lost is cancelled when the hold's session ends: the server has freed
// the lock, and the portable layer ends the hold at once.
func (h *advHold) Lost() context.Context { return h.s.lost }

// Renew proves the hold's session alive with one round trip; that also
// keeps the server from ending it as idle.
func (h *advHold) Renew(ctx context.Context) (backends.Grant, error) {
	r := h.a.renewBatch(ctx, []backends.Hold{h})
	return r[0].Grant, r[0].Err
}

// renewBatch pings each session that holds one of holds, once.
func (a *advisory) renewBatch(ctx context.Context, holds []backends.Hold) []backends.RenewResult {
	out := make([]backends.RenewResult, len(holds))
	bySession := map[*session][]int{}
	for i, bh := range holds {
		h := bh.(*advHold)
		bySession[h.s] = append(bySession[h.s], i)
	}
	for s, idx := range bySession {
		sent := time.Now()
		err := a.ping(ctx, s)
		for _, i := range idx {
			h := holds[i].(*advHold)
			out[i].Grant, out[i].Err = backends.Grant{Sent: sent, TTL: h.ttl}, err
		}
	}
	return out
}

// ping runs one statement on s, detached from ctx and bounded by the
// request timeout. A session that is dead, or whose connection fails, has
// lost its locks: ErrNotHeld (its holds were told already). A ping
// without an answer in time is ErrUnavailable; the driver drops the
// connection then, which ends the session too.
func (a *advisory) ping(ctx context.Context, s *session) error {
	drv := a.drv
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return fmt.Errorf("%w: %w", backends.ErrNotHeld, errSessionDead)
	}
	qctx, cancel := drv.bound(context.WithoutCancel(ctx))
	defer cancel()
	var one int
	err := s.conn.QueryRowContext(qctx, drv.st.get("ping")).Scan(&one)
	if err == nil {
		return nil
	}
	s.killLocked(err)
	if qctx.Err() != nil {
		return driverkit.RequestError(qctx, "sql renew", err)
	}
	return fmt.Errorf("%w: %w: %w", backends.ErrNotHeld, errSessionDead, err)
}

// Release unlocks the name on its session and, on PostgreSQL, wakes its
// waiters. It runs detached from ctx (bounded by the request timeout): a
// statement cut short would drop the connection, and with it every other
// lock on the session.
func (h *advHold) Release(ctx context.Context) error {
	a, drv, s := h.a, h.a.drv, h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	defer h.released.Do(func() {
		s.holds--
		h.freeLocal()
	})
	qctx, cancel := drv.bound(context.WithoutCancel(ctx))
	defer cancel()
	if s.dead {
		return a.wentWithSession(ctx, nil)
	}
	var (
		ok  sql.NullBool
		err error
	)
	switch {
	case h.kind != localWriter:
		err = a.releaseSharedOn(qctx, s, h, &ok)
	case h.elect:
		err = a.releaseElectOn(qctx, s, h, &ok)
	case drv.notify != nil:
		var woken int64
		err = queryRow(qctx, drv.d, s.conn, drv.st.get("advisory_release"),
			[]any{h.advKey, drv.channel, hex.EncodeToString(h.key), h.key}, &ok, &woken)
	default:
		// Nobody to wake (MySQL polls): the plain unlock.
		err = s.preparedOn(qctx, drv, "advisory_unlock").QueryRowContext(qctx, drv.st.get("advisory_unlock"), h.advKey).Scan(&ok)
	}
	if err != nil {
		// Unknown outcome: drop the connection, which frees the lock.
		s.killLocked(err)
		cerr := drv.d.classify(qctx, "sql release", err)
		if !errors.Is(cerr, backends.ErrUnavailable) {
			return cerr
		}
		return a.wentWithSession(ctx, err)
	}
	if !ok.Bool {
		return fmt.Errorf("%w: the session no longer holds the lock", backends.ErrNotHeld)
	}
	return nil
}

// wentWithSession is Release's answer for a hold whose session's
// connection failed (with err, if Release saw it fail): the lock went with
// the connection. No request can free it sooner, so there is nothing to
// retry. If the server answers a ping (on another connection), it has seen
// the connection go and freed the lock: ErrNotHeld. If it does not,
// ErrUnavailable: it frees the lock when it notices that the connection is
// gone (at once if the connection closed; after the session's idle
// timeout, the TTL, if the network went silent). A ping, not a dial: a
// proxy in front of a server that is down still takes connections.
func (a *advisory) wentWithSession(ctx context.Context, err error) error {
	pctx, cancel := a.drv.bound(context.WithoutCancel(ctx))
	defer cancel()
	if perr := a.drv.db.PingContext(pctx); perr != nil {
		return driverkit.Unavailable("sql release", errors.Join(
			fmt.Errorf("the holding connection failed, and the server, which frees its locks once it sees it gone, does not answer: %w", perr), err))
	}
	if err != nil {
		return fmt.Errorf("%w: %w: %w", backends.ErrNotHeld, errSessionDead, err)
	}
	return fmt.Errorf("%w: %w", backends.ErrNotHeld, errSessionDead)
}

// close ends s and gives its connection back (dropped, not pooled).
func (s *session) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked(errors.New("locker closed"))
}

// close ends every session, which frees whatever they still hold.
func (a *advisory) close() {
	a.mu.Lock()
	a.closed = true
	ss := a.sessions
	a.sessions = nil
	a.mu.Unlock()
	for _, s := range ss {
		if s != nil {
			s.close()
		}
	}
}
