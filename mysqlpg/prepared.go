package mysqlpg

import (
	"context"
	"database/sql"
	"sync"
)

// MySQL's writer's acquire and release, the statements of every
// uncontended Lock and Unlock, run as server-side prepared statements, in
// both modes: the server parsed the acquire's upsert, conditional
// assignments on every column, at every call, which cost more than running
// it. A statement is prepared on a connection the first time it runs
// there (one round trip per connection, once) and then executed in the
// binary protocol, one round trip. Every other statement is sent as text
// with its arguments interpolated, one round trip, as before. PostgreSQL's
// statements are prepared by pgx's statement cache already.

// preparedNames are the statements run prepared on MySQL's pool (lease
// mode); sessionPrepared those run prepared on an advisory session's
// connection.
var (
	preparedNames   = map[string]bool{"lease_acquire": true, "lease_release": true}
	sessionPrepared = map[string]bool{"advisory_try_acquire": true, "advisory_unlock": true}
)

// preparedOn returns name's statement prepared on s's connection as a
// querier (its query text unused), or the connection itself where it does
// not apply: on PostgreSQL, for another statement, or when the
// preparation failed. A failure is kept for the session's life (nil in
// stmts), so that a server that refuses to prepare (its
// max_prepared_stmt_count reached) costs one round trip per session, not
// one per call; a connection that failed ends the session anyway. The
// caller holds s.mu and runs the statement next, under the same ctx.
func (s *session) preparedOn(ctx context.Context, drv *driver, name string) querier {
	if drv.d == postgres || !sessionPrepared[name] {
		return s.conn
	}
	if st, tried := s.stmts[name]; tried {
		if st == nil {
			return s.conn
		}
		return stmtQuerier{st}
	}
	if s.stmts == nil {
		s.stmts = map[string]*sql.Stmt{}
	}
	st, err := s.conn.PrepareContext(ctx, drv.st.get(name))
	if err != nil {
		s.stmts[name] = nil
		return s.conn
	}
	s.stmts[name] = st
	return stmtQuerier{st}
}

// preparedSet holds a driver's prepared statements, made on first use.
type preparedSet struct {
	mu     sync.Mutex
	stmts  map[string]*sql.Stmt
	closed bool
}

// preparedOr returns name's statement prepared on the pool as a querier
// (its query text unused), or q itself where it does not apply: on
// PostgreSQL, on a pinned connection, for another statement, or when the
// preparation fails (the text path still works, and the next call tries
// again). The preparation runs under ctx's bound and outside the set's
// lock: a dead server holds up the call that prepares, never another
// call's acquisition or release behind it.
func (drv *driver) preparedOr(ctx context.Context, q querier, name string) querier {
	if drv.d.returning || q != querier(drv.db) || !preparedNames[name] {
		return q
	}
	p := &drv.prep
	p.mu.Lock()
	s, closed := p.stmts[name], p.closed
	p.mu.Unlock()
	switch {
	case closed:
		return q
	case s != nil:
		return stmtQuerier{s}
	}
	s, err := drv.db.PrepareContext(ctx, drv.st.get(name))
	if err != nil {
		return q
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		s.Close()
		return q
	case p.stmts[name] != nil:
		s.Close() // another call prepared it meanwhile
		return stmtQuerier{p.stmts[name]}
	}
	if p.stmts == nil {
		p.stmts = map[string]*sql.Stmt{}
	}
	p.stmts[name] = s
	return stmtQuerier{s}
}

// close closes the prepared statements; later calls take the text path.
func (p *preparedSet) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, s := range p.stmts {
		s.Close()
	}
	p.stmts = nil
}

// stmtQuerier runs a prepared statement in place of a querier's query.
type stmtQuerier struct{ s *sql.Stmt }

func (q stmtQuerier) ExecContext(ctx context.Context, _ string, args ...any) (sql.Result, error) {
	return q.s.ExecContext(ctx, args...)
}

func (q stmtQuerier) QueryRowContext(ctx context.Context, _ string, args ...any) *sql.Row {
	return q.s.QueryRowContext(ctx, args...)
}
