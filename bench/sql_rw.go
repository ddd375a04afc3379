package bench

import (
	"context"
	"database/sql"
	"time"
)

// The databases' own read-write locks, for the read-heavy cell (R1): no
// Go client offers a read-write lock over PostgreSQL or MySQL, so these
// are the servers' native primitives, taken raw on one pinned connection,
// without tokens, leases, renewal or reentrancy. They are what a reader
// costs on the server before padlock adds anything, and so the ceiling
// padlock's readers can scale to on the same machine.

// sqlRWImpls returns the native read-write locks of d's database: row
// locks held in a transaction on both, and PostgreSQL's shared advisory
// locks.
func sqlRWImpls(d sqlDialect, conn func(ctx context.Context, rt *Counter) (*sql.DB, *sql.Conn, error)) []Impl {
	impls := []Impl{{Name: "row-lock", Role: RolePeer, MinRT: 3, Waits: true, Recipes: []string{R1}, OnlyRecipes: true,
		New: func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
			db, c, err := conn(ctx, rt)
			if err != nil {
				return nil, err
			}
			return &rowLockClient{d: d, db: db, c: c, prefix: prefix}, nil
		}}}
	if d.backend == "postgres" {
		impls = append(impls, Impl{Name: "pg_advisory_lock_shared", Role: RolePeer, MinRT: 2, Waits: true, Recipes: []string{R1}, OnlyRecipes: true,
			New: func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
				db, c, err := conn(ctx, rt)
				if err != nil {
					return nil, err
				}
				return &pgAdvisoryRWClient{db: db, c: c, prefix: prefix}, nil
			}})
	}
	return impls
}

// rowLockClient takes a name's row in the floor's table FOR UPDATE
// (writer) or FOR SHARE (reader, LOCK IN SHARE MODE on MySQL) in a
// transaction that its release commits: BEGIN, the SELECT, COMMIT. The
// server queues the waiters. The row is made the first time the client
// uses a name (another client may have made it: neither fails), and
// deleted when it closes.
type rowLockClient struct {
	d      sqlDialect
	db     *sql.DB
	c      *sql.Conn
	prefix string
	made   map[string]bool
}

func (c *rowLockClient) Lock(ctx context.Context, name string) (Held, error) {
	return c.take(ctx, name, false)
}

func (c *rowLockClient) RLock(ctx context.Context, name string) (Held, error) {
	return c.take(ctx, name, true)
}

func (c *rowLockClient) take(ctx context.Context, name string, shared bool) (Held, error) {
	k := c.prefix + name
	if !c.made[k] {
		ensure := `INSERT INTO ` + floorTable + ` (k, owner, expires_at) VALUES ($1, '', now()) ON CONFLICT (k) DO NOTHING`
		if c.d.backend == "mysql" {
			ensure = `INSERT IGNORE INTO ` + floorTable + ` (k, owner, expires_at) VALUES (?, '', UTC_TIMESTAMP(6))`
		}
		if _, err := c.c.ExecContext(ctx, ensure, k); err != nil {
			return Held{}, err
		}
		if c.made == nil {
			c.made = map[string]bool{}
		}
		c.made[k] = true
	}
	q := `SELECT 1 FROM ` + floorTable + ` WHERE k = $1 FOR UPDATE`
	switch {
	case c.d.backend == "mysql" && shared:
		q = `SELECT 1 FROM ` + floorTable + ` WHERE k = ? LOCK IN SHARE MODE`
	case c.d.backend == "mysql":
		q = `SELECT 1 FROM ` + floorTable + ` WHERE k = ? FOR UPDATE`
	case shared:
		q = `SELECT 1 FROM ` + floorTable + ` WHERE k = $1 FOR SHARE`
	}
	tx, err := c.c.BeginTx(ctx, nil)
	if err != nil {
		return Held{}, err
	}
	var one int
	if err := tx.QueryRowContext(ctx, q, k).Scan(&one); err != nil {
		tx.Rollback()
		return Held{}, err
	}
	return Held{Release: func(context.Context) error { return tx.Commit() }}, nil
}

// Close deletes the rows the client made, as a lease's release deletes
// its row, and closes its connection.
func (c *rowLockClient) Close() error {
	del := `DELETE FROM ` + floorTable + ` WHERE k = $1`
	if c.d.backend == "mysql" {
		del = `DELETE FROM ` + floorTable + ` WHERE k = ?`
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a dead server must not hold Close
	defer cancel()
	var err error
	for k := range c.made {
		if _, e := c.c.ExecContext(ctx, del, k); e != nil && err == nil {
			err = e
		}
	}
	c.c.Close()
	if e := c.db.Close(); err == nil {
		err = e
	}
	return err
}

// pgAdvisoryRWClient takes PostgreSQL's advisory lock of a name in
// exclusive (writer) or shared (reader) mode on its session, waiting on
// the server: one statement to take it, one to release it.
type pgAdvisoryRWClient struct {
	db     *sql.DB
	c      *sql.Conn
	prefix string
}

func (c *pgAdvisoryRWClient) Lock(ctx context.Context, name string) (Held, error) {
	return c.take(ctx, name, `SELECT pg_advisory_lock($1)`, `SELECT pg_advisory_unlock($1)`)
}

func (c *pgAdvisoryRWClient) RLock(ctx context.Context, name string) (Held, error) {
	return c.take(ctx, name, `SELECT pg_advisory_lock_shared($1)`, `SELECT pg_advisory_unlock_shared($1)`)
}

func (c *pgAdvisoryRWClient) take(ctx context.Context, name, lock, unlock string) (Held, error) {
	k := postgresDialect.advisoryKey(c.prefix + name)
	if _, err := c.c.ExecContext(ctx, lock, k); err != nil {
		return Held{}, err
	}
	return Held{Release: func(ctx context.Context) error {
		_, err := c.c.ExecContext(ctx, unlock, k)
		return err
	}}, nil
}

func (c *pgAdvisoryRWClient) Close() error {
	c.c.Close()
	return c.db.Close()
}
