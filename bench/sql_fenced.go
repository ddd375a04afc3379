package bench

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// The SQL databases' fenced floors (RoleFencedFloor): the wire floor of
// each mode plus what padlock's guarantees put on the wire. A grant takes
// the name's next token in the statement that takes the name, so that
// tokens rise in grant order, and the name's row is kept after the
// release, since its token must outlive the hold. Lease mode: one upsert
// that takes an expired row and moves its token on, answering the token;
// a release that ends only its own lease. Advisory mode: the session's
// try lock and the token's upsert in one statement; the release unlocks.
// They carry no owner's identity, host or pid, wake nobody and keep no
// queue: the least any client must send for a fenced lease.

// fencedTable is the fenced floors' table: a key, its owner, its token
// and its lease's end (never live in advisory mode, where the session's
// lock is the hold).
const fencedTable = "padlock_bench_fenced"

// sqlFenced holds a database's fenced-floor statements.
type sqlFenced struct {
	create          string
	lock, unlock    string // lease mode
	advLock         string // advisory mode; the unlock is the floor's
	countLive, drop string // by key prefix
}

var fencedStatements = map[string]sqlFenced{
	"postgres": {
		create: `CREATE TABLE IF NOT EXISTS ` + fencedTable + ` (k text PRIMARY KEY, owner text NOT NULL, token bigint NOT NULL, expires_at timestamptz NOT NULL)`,
		lock: `INSERT INTO ` + fencedTable + ` AS f (k, owner, token, expires_at) VALUES ($1, $2, 1, now() + interval '10 seconds')
ON CONFLICT (k) DO UPDATE SET owner = EXCLUDED.owner, token = f.token + 1, expires_at = EXCLUDED.expires_at WHERE f.expires_at <= now()
RETURNING token`,
		unlock: `UPDATE ` + fencedTable + ` SET expires_at = '-infinity' WHERE k = $1 AND owner = $2 AND expires_at > now()`,
		advLock: `WITH l AS (SELECT pg_try_advisory_lock($2) AS ok)
INSERT INTO ` + fencedTable + ` AS f (k, owner, token, expires_at) SELECT $1, '', 1, '-infinity' FROM l WHERE l.ok
ON CONFLICT (k) DO UPDATE SET token = f.token + 1
RETURNING token`,
		countLive: `SELECT count(*) FROM ` + fencedTable + ` WHERE starts_with(k, $1) AND expires_at > now()`,
		drop:      `DELETE FROM ` + fencedTable + ` WHERE starts_with(k, $1)`,
	},
	// MySQL's upsert answers the token as the statement's last insert id
	// (LAST_INSERT_ID(expr)), as padlock's does, in the same round trip.
	// Its assignments run in order, each seeing the ones before: the
	// expiry is tested before it changes.
	"mysql": {
		create: `CREATE TABLE IF NOT EXISTS ` + fencedTable + ` (k VARCHAR(255) PRIMARY KEY, owner VARCHAR(64) NOT NULL, token BIGINT NOT NULL, expires_at DATETIME(6) NOT NULL)`,
		lock: `INSERT INTO ` + fencedTable + ` (k, owner, token, expires_at) VALUES (?, ?, LAST_INSERT_ID(1), UTC_TIMESTAMP(6) + INTERVAL 10 SECOND)
ON DUPLICATE KEY UPDATE token = IF(expires_at <= UTC_TIMESTAMP(6), LAST_INSERT_ID(token + 1), token),
    owner = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(owner), owner),
    expires_at = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(expires_at), expires_at)`,
		unlock: `UPDATE ` + fencedTable + ` SET expires_at = '1000-01-01' WHERE k = ? AND owner = ? AND expires_at > UTC_TIMESTAMP(6)`,
		advLock: `INSERT INTO ` + fencedTable + ` (k, owner, token, expires_at) SELECT ?, '', LAST_INSERT_ID(1), '1000-01-01' FROM DUAL WHERE GET_LOCK(?, 0) = 1
ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1)`,
		countLive: `SELECT count(*) FROM ` + fencedTable + ` WHERE LEFT(k, CHAR_LENGTH(?)) = ? AND expires_at > UTC_TIMESTAMP(6)`,
		drop:      `DELETE FROM ` + fencedTable + ` WHERE LEFT(k, CHAR_LENGTH(?)) = ?`,
	},
}

// sqlFencedImpls returns d's fenced floors, one per mode, over pinned
// connections from conn.
func sqlFencedImpls(d sqlDialect, f sqlFenced, conn func(ctx context.Context, rt *Counter) (*sql.DB, *sql.Conn, error)) []Impl {
	closer := func(db *sql.DB, c *sql.Conn) func() error {
		return func() error {
			c.Close()
			return db.Close()
		}
	}
	return []Impl{
		{Name: "floor-fenced-lease", Role: RoleFencedFloor, MinRT: 2, Tokens: true, New: func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
			db, c, err := conn(ctx, rt)
			if err != nil {
				return nil, err
			}
			return funcClient{lock: func(ctx context.Context, name string) (Held, error) {
				k, owner := prefix+name, newValue()
				token, err := fencedTake(ctx, d, c, name, f.lock, k, owner)
				if err != nil {
					return Held{}, err
				}
				return Held{Token: token, Release: func(ctx context.Context) error {
					_, err := c.ExecContext(ctx, f.unlock, k, owner)
					return err
				}}, nil
			}, close: closer(db, c)}, nil
		}},
		{Name: "floor-fenced-advisory", Role: RoleFencedFloor, MinRT: 2, Tokens: true, New: func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
			db, c, err := conn(ctx, rt)
			if err != nil {
				return nil, err
			}
			return funcClient{lock: func(ctx context.Context, name string) (Held, error) {
				k, ak := prefix+name, d.advisoryKey(prefix+name)
				token, err := fencedTake(ctx, d, c, name, f.advLock, k, ak)
				if err != nil {
					return Held{}, err
				}
				return Held{Token: token, Release: func(ctx context.Context) error {
					_, err := c.ExecContext(ctx, d.advUnlock, ak)
					return err
				}}, nil
			}, close: closer(db, c)}, nil
		}},
	}
}

// fencedTake runs a fenced floor's granting statement on c: the token it
// took, or errBusy when the name is held.
func fencedTake(ctx context.Context, d sqlDialect, c *sql.Conn, name, stmt string, args ...any) (uint64, error) {
	var token int64
	if d.backend == "mysql" {
		r, err := c.ExecContext(ctx, stmt, args...)
		if err != nil {
			return 0, err
		}
		// 1 inserted, 2 taken over, 0 held by another.
		if n, err := r.RowsAffected(); err != nil || n == 0 {
			return 0, errBusy(name)
		}
		token, err = r.LastInsertId()
		return uint64(token), err
	}
	err := pgxToken(ctx, c, &token, stmt, args...)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, errBusy(name)
	}
	return uint64(token), err
}

// pgxToken runs a statement that answers a token on c's pgx connection
// directly, as padlock's PostgreSQL statements that answer a row do:
// database/sql would start a goroutine for each query whose context can
// end.
func pgxToken(ctx context.Context, c *sql.Conn, token *int64, stmt string, args ...any) error {
	return c.Raw(func(dc any) error {
		return dc.(*stdlib.Conn).Conn().QueryRow(ctx, stmt, args...).Scan(token)
	})
}
