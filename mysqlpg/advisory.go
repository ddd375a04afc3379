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
	"sync"
	"time"

	"github.com/padlock-go/padlock/backends"
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

	opening []sync.Mutex // per slot: one acquisition opens its session

	mu       sync.Mutex
	sessions []*session
	local    map[string]chan struct{} // held names; closed on release
	closed   bool
}

// session is one pinned connection and the locks it holds.
type session struct {
	mu    sync.Mutex // one statement at a time
	conn  *sql.Conn
	idle  time.Duration // the idle timeout set on the server
	dead  bool          // the connection failed: its locks are gone
	holds int
}

func newAdvisory(drv *driver) *advisory {
	n := drv.cfg.pool
	return &advisory{drv: drv, opening: make([]sync.Mutex, n), sessions: make([]*session, n), local: map[string]chan struct{}{}}
}

// advHold is one advisory-mode acquisition.
type advHold struct {
	a        *advisory
	s        *session
	key      []byte // row key
	advKey   any    // the server's lock key: int64 on PostgreSQL, a name on MySQL
	owner    string
	token    uint64
	ttl      time.Duration
	grant    backends.Grant
	released sync.Once
}

func (h *advHold) Token() uint64         { return h.token }
func (h *advHold) Grant() backends.Grant { return h.grant }

// advisoryKey derives the server's lock key for a name. Advisory locks are
// per database on PostgreSQL and per server on MySQL, so the key covers the
// database and table too. PostgreSQL takes 64 bits; MySQL a name of at
// most 64 characters, "padlock:" and 56 hex digits (224 bits).
func (a *advisory) advisoryKey(name string) any {
	cfg := a.drv.cfg
	sum := sha256.Sum256([]byte(cfg.database + "\x00" + cfg.quotedTable() + "\x00" + name))
	if a.drv.d == postgres {
		return int64(binary.BigEndian.Uint64(sum[:8]))
	}
	return "padlock:" + hex.EncodeToString(sum[:28])
}

func (a *advisory) acquire(ctx context.Context, req backends.Request) (backends.Hold, error) {
	h := &advHold{a: a, key: lockKey(req.Name), advKey: a.advisoryKey(req.Name), owner: newID(), ttl: req.TTL}
	local := hex.EncodeToString(h.key)
	if err := a.takeLocal(ctx, local, req.Wait); err != nil {
		return nil, err
	}
	hold, err := a.acquireServer(ctx, h, req)
	if err != nil {
		a.freeLocal(local)
		return nil, err
	}
	return hold, nil
}

// takeLocal claims name for one acquisition of this Locker, waiting for
// another to release it when wait is true.
func (a *advisory) takeLocal(ctx context.Context, name string, wait bool) error {
	for {
		a.mu.Lock()
		if a.closed {
			a.mu.Unlock()
			return fmt.Errorf("mysqlpg: %w", backends.ErrClosed)
		}
		ch, busy := a.local[name]
		if !busy {
			a.local[name] = make(chan struct{})
			a.mu.Unlock()
			return nil
		}
		a.mu.Unlock()
		if !wait {
			return backends.ErrNotAcquired
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (a *advisory) freeLocal(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ch, ok := a.local[name]; ok {
		close(ch)
		delete(a.local, name)
	}
}

// acquireServer asks the server until it grants the name, polling with
// backoff; on PostgreSQL a release NOTIFY wakes the poll early.
func (a *advisory) acquireServer(ctx context.Context, h *advHold, req backends.Request) (backends.Hold, error) {
	drv := a.drv
	var (
		w    *waiter
		said time.Time // when this waiter last said it waits
	)
	defer func() {
		if w != nil {
			w.stop()
		}
	}()
	for attempt := 0; ; attempt++ {
		ok, err := a.try(ctx, h, req.Name)
		switch {
		case err != nil:
			return nil, err
		case ok:
			return h, nil
		case !req.Wait:
			return nil, backends.ErrNotAcquired
		}
		if w == nil && drv.notify != nil {
			w = drv.notify.watch(ctx, h.key)
			continue
		}
		if w != nil && time.Since(said) > interestRefresh {
			// Say that we wait, then look again: a release before this
			// sent no NOTIFY, and one after it will.
			if err := a.sayWaiting(ctx, h); err != nil {
				return nil, err
			}
			said = time.Now()
			continue
		}
		// A holder whose connection died was never announced: poll too.
		delay := req.Retry.NextBackoff(attempt)
		if delay < 0 {
			return nil, backends.ErrNotAcquired
		}
		var wake <-chan struct{}
		if w != nil {
			wake = w.c
		}
		t := time.NewTimer(delay)
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		t.Stop()
	}
}

// interestRefresh is how often a PostgreSQL waiter renews its note that
// it waits (which lasts five seconds).
const interestRefresh = 2500 * time.Millisecond

// sayWaiting notes in the name's row, on the name's session, that someone
// waits for it, so that its release sends a NOTIFY.
func (a *advisory) sayWaiting(ctx context.Context, h *advHold) error {
	s, err := a.session(ctx, a.slot(h.key), h.ttl)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return backends.Unavailable("sql wait", errSessionDead)
	}
	qctx, cancel := a.drv.bound(ctx)
	defer cancel()
	if _, err := s.conn.ExecContext(qctx, a.drv.st.get("advisory_wait"), h.key); err != nil {
		err = a.drv.d.classify(qctx, "sql wait", err)
		if errors.Is(err, backends.ErrUnavailable) {
			s.killLocked() // the connection's state is unknown
		}
		return err
	}
	return nil
}

// slot is the session slot of a name.
func (a *advisory) slot(key []byte) int {
	return int(binary.BigEndian.Uint32(key[:4]) % uint32(len(a.opening)))
}

// try asks the server once, on the name's session. A session that failed
// while it held nothing (the server ends idle sessions) is replaced and
// asked once more.
func (a *advisory) try(ctx context.Context, h *advHold, name string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	idx := a.slot(h.key)
	for retry := 0; ; retry++ {
		s, err := a.session(ctx, idx, h.ttl)
		if err != nil {
			return false, err
		}
		ok, empty, err := a.tryOn(ctx, s, h, name)
		if err != nil && empty && retry == 0 && errors.Is(err, backends.ErrUnavailable) {
			continue
		}
		return ok, err
	}
}

// tryOn runs the acquisition on session s, detached from ctx (bounded by
// the request timeout) so that a grant is never left behind: one that
// arrives after the caller gave up is unlocked at once. It also reports
// whether s held nothing before.
func (a *advisory) tryOn(ctx context.Context, s *session, h *advHold, name string) (ok, empty bool, err error) {
	drv := a.drv
	s.mu.Lock()
	defer s.mu.Unlock()
	empty = s.holds == 0
	if s.dead {
		return false, empty, backends.Unavailable("sql acquire", errSessionDead)
	}
	dctx, cancel := drv.bound(context.WithoutCancel(ctx))
	defer cancel()
	sent := time.Now()
	var token uint64
	if drv.d == postgres {
		var (
			got bool
			tok sql.NullInt64
		)
		err = s.conn.QueryRowContext(dctx, drv.st.get("advisory_acquire"),
			h.advKey, h.key, name, h.owner, drv.host, drv.pid).Scan(&got, &tok)
		switch {
		case err == nil && got && !tok.Valid:
			err = errLeaseRow // s holds the lock: undone below
		case err == nil && got:
			token, ok = uint64(tok.Int64), true
		}
	} else {
		var got sql.NullInt64
		err = s.conn.QueryRowContext(dctx, drv.st.get("advisory_try"), h.advKey).Scan(&got)
		if err == nil && got.Valid && got.Int64 == 1 {
			err = drv.retrying(func() error {
				var err error
				token, ok, err = upsertOn(dctx, drv.d, s.conn, drv.st.get("advisory_acquire"),
					h.key, name, h.owner, drv.host, drv.pid, h.advKey)
				return err
			})
			if err == nil && !ok {
				err = errLeaseRow
			}
		}
	}
	if err != nil {
		err = drv.d.classify(dctx, "sql acquire", err)
		if !errors.Is(err, backends.ErrUnavailable) && a.unlock(dctx, s, h.advKey) == nil {
			return false, empty, err // refused, and undone
		}
		// The lock may be held by s with nobody to release it: end s,
		// which frees every lock it has.
		s.killLocked()
		return false, empty, err
	}
	if !ok {
		return false, empty, nil
	}
	if ctx.Err() != nil {
		if a.unlock(dctx, s, h.advKey) != nil {
			s.killLocked()
		}
		return false, empty, ctx.Err()
	}
	s.holds++
	h.s, h.token, h.grant = s, token, backends.Grant{Sent: sent, TTL: h.ttl}
	return true, empty, nil
}

// errLeaseRow is the error when a lease-mode client holds the name on the
// same table: one table serves one mode.
var errLeaseRow = fmt.Errorf("%w: a lease-mode client holds this name on the same table, and one table serves one mode", backends.ErrInvalidOption)

// errSessionDead is the cause when a holding session's connection failed.
var errSessionDead = errors.New("the holding connection failed, and the server freed its locks")

// unlock releases key on s, which the caller has locked.
func (a *advisory) unlock(ctx context.Context, s *session, key any) error {
	var ok sql.NullBool
	err := s.conn.QueryRowContext(ctx, a.drv.st.get("advisory_unlock"), key).Scan(&ok)
	if err == nil && !ok.Bool {
		err = errors.New("not held")
	}
	return err
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
	qctx, cancel := drv.bound(ctx)
	defer cancel()
	s, err := current()
	if err != nil {
		return nil, err
	}
	if s == nil || s.isDead() {
		// One opener per slot: the pool has one connection per slot, and
		// acquisitions racing to open the same slot would wait for ever
		// for a connection that the winner pinned.
		a.opening[idx].Lock()
		defer a.opening[idx].Unlock()
		if s, err = current(); err != nil {
			return nil, err
		}
		if s == nil || s.isDead() {
			if s != nil {
				s.close() // make sure its connection is back in the pool
			}
			conn, err := drv.db.Conn(qctx)
			if err != nil {
				return nil, drv.d.classify(qctx, "sql session", err)
			}
			s = &session{conn: conn}
			a.mu.Lock()
			closed := a.closed
			if !closed {
				a.sessions[idx] = s
			}
			a.mu.Unlock()
			if closed {
				conn.Close()
				return nil, fmt.Errorf("mysqlpg: %w", backends.ErrClosed)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return nil, backends.Unavailable("sql session", errSessionDead)
	}
	if s.idle < ttl {
		if _, err := s.conn.ExecContext(qctx, drv.st.get("advisory_setup"), drv.d.idleTimeout(ttl)); err != nil {
			s.killLocked()
			return nil, drv.d.classify(qctx, "sql session", err)
		}
		s.idle = ttl
	}
	return s, nil
}

func (s *session) isDead() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead
}

// killLocked ends s, whose mu the caller holds: its connection is closed,
// which frees its locks on the server, and its holds are lost.
func (s *session) killLocked() {
	if s.dead {
		return
	}
	s.dead = true
	// Make database/sql drop the connection instead of pooling it.
	s.conn.Raw(func(any) error { return sqldriver.ErrBadConn })
	s.conn.Close()
}

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

// ping runs one statement on s. A session that is dead, or whose
// connection fails, has lost its locks: ErrNotHeld. A ping without an
// answer in time is ErrUnavailable; the connection is dropped then, so the
// next renewal reports the loss.
func (a *advisory) ping(ctx context.Context, s *session) error {
	drv := a.drv
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return fmt.Errorf("%w: %w", backends.ErrNotHeld, errSessionDead)
	}
	qctx, cancel := drv.bound(ctx)
	defer cancel()
	var one int
	err := s.conn.QueryRowContext(qctx, drv.st.get("ping")).Scan(&one)
	if err == nil {
		return nil
	}
	s.killLocked()
	if qctx.Err() != nil {
		return backends.RequestError(qctx, "sql renew", err)
	}
	return fmt.Errorf("%w: %w: %w", backends.ErrNotHeld, errSessionDead, err)
}

// Release unlocks the name on its session and, on PostgreSQL, wakes its
// waiters.
func (h *advHold) Release(ctx context.Context) error {
	a, drv, s := h.a, h.a.drv, h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	defer h.released.Do(func() {
		s.holds--
		a.freeLocal(hex.EncodeToString(h.key))
	})
	qctx, cancel := drv.bound(ctx)
	defer cancel()
	if s.dead {
		// The lock went with the connection, or will when a server that
		// cannot be reached now drops it: say which.
		if err := backends.Probe(qctx, drv.addrs); err != nil {
			return backends.Unavailable("sql release", fmt.Errorf("%w; the server: %w", errSessionDead, err))
		}
		return fmt.Errorf("%w: %w", backends.ErrNotHeld, errSessionDead)
	}
	var (
		ok  sql.NullBool
		err error
	)
	if drv.notify != nil {
		var woken int64
		err = s.conn.QueryRowContext(qctx, drv.st.get("advisory_release"),
			h.advKey, drv.channel, hex.EncodeToString(h.key), h.key).Scan(&ok, &woken)
	} else {
		var n sql.NullInt64
		err = s.conn.QueryRowContext(qctx, drv.st.get("advisory_release"), h.advKey).Scan(&n)
		ok.Bool = n.Valid && n.Int64 == 1
	}
	if err != nil {
		// Unknown outcome: drop the connection, which frees the lock.
		s.killLocked()
		return drv.d.classify(qctx, "sql release", err)
	}
	if !ok.Bool {
		return fmt.Errorf("%w: the session no longer holds the lock", backends.ErrNotHeld)
	}
	return nil
}

// close ends s and gives its connection back (dropped, not pooled).
func (s *session) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
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
