package mysqlpg

import (
	"context"
	"database/sql"
	"sync"
)

// MySQL's writer's acquire and release, the statements of every
// uncontended Lock and Unlock, run as server-side prepared statements:
// the server parsed the acquire's upsert, eight conditional assignments,
// at every call, which cost more than running it. database/sql prepares a
// statement on a connection the first time it runs there (one round trip
// per connection, once) and then executes it in the binary protocol, one
// round trip. Every other statement is sent as text with its arguments
// interpolated, one round trip, as before. PostgreSQL's statements are
// prepared by pgx's statement cache already.

// preparedNames are the statements run prepared on MySQL.
var preparedNames = map[string]bool{"lease_acquire": true, "lease_release": true}

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
