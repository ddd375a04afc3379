package bench

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"net"
	"net/url"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/mysqlpg"
)

// floorTable is the lease table of the SQL wire floor: a key, its owner
// and its expiry, nothing else.
const floorTable = "padlock_bench_floor"

// sqlDialect holds what differs between PostgreSQL and MySQL.
type sqlDialect struct {
	backend                 string
	createFloor             string
	leaseLock, leaseUnlock  string
	advisoryLock, advUnlock string
	advisoryKey             func(name string) any
	deleteRows, countHeld   string // of padlock's table, by name prefix
	deleteFloor             string // of the floor's table, by key prefix
	open                    func(u *url.URL, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (*sql.DB, error)
}

var postgresDialect = sqlDialect{
	backend:     "postgres",
	createFloor: `CREATE TABLE IF NOT EXISTS ` + floorTable + ` (k text PRIMARY KEY, owner text NOT NULL, expires_at timestamptz NOT NULL)`,
	leaseLock: `INSERT INTO ` + floorTable + ` AS f (k, owner, expires_at) VALUES ($1, $2, now() + interval '10 seconds')
ON CONFLICT (k) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at WHERE f.expires_at <= now()`,
	leaseUnlock:  `DELETE FROM ` + floorTable + ` WHERE k = $1 AND owner = $2`,
	advisoryLock: `SELECT pg_advisory_lock($1)`,
	advUnlock:    `SELECT pg_advisory_unlock($1)`,
	advisoryKey: func(name string) any {
		h := fnv.New64a()
		h.Write([]byte(name))
		return int64(h.Sum64())
	},
	deleteRows:  `DELETE FROM {{table}} WHERE starts_with(name, $1)`,
	countHeld:   `SELECT count(*) FROM {{table}} WHERE starts_with(name, $1) AND expires_at > now() AND expires_at < 'infinity'`,
	deleteFloor: `DELETE FROM ` + floorTable + ` WHERE starts_with(k, $1)`,
	open: func(u *url.URL, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (*sql.DB, error) {
		v := *u
		v.RawQuery = ""
		if m := u.Query().Get("sslmode"); m != "" {
			v.RawQuery = "sslmode=" + m // disable: sqlGroup refuses the others
		}
		pc, err := pgx.ParseConfig(v.String())
		if err != nil {
			return nil, err
		}
		if dial != nil {
			pc.DialFunc = pgconn.DialFunc(dial)
		}
		return stdlib.OpenDB(*pc), nil
	},
}

var mysqlDialect = sqlDialect{
	backend:     "mysql",
	createFloor: `CREATE TABLE IF NOT EXISTS ` + floorTable + ` (k VARCHAR(255) PRIMARY KEY, owner VARCHAR(64) NOT NULL, expires_at DATETIME(6) NOT NULL)`,
	leaseLock: `INSERT INTO ` + floorTable + ` (k, owner, expires_at) VALUES (?, ?, UTC_TIMESTAMP(6) + INTERVAL 10 SECOND)
ON DUPLICATE KEY UPDATE owner = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(owner), owner),
    expires_at = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(expires_at), expires_at)`,
	leaseUnlock:  `DELETE FROM ` + floorTable + ` WHERE k = ? AND owner = ?`,
	advisoryLock: `SELECT GET_LOCK(?, 10)`,
	advUnlock:    `SELECT RELEASE_LOCK(?)`,
	advisoryKey: func(name string) any {
		// Lock names are at most 64 characters.
		h := fnv.New128a()
		h.Write([]byte(name))
		return hex.EncodeToString(h.Sum(nil))
	},
	deleteRows:  `DELETE FROM {{table}} WHERE LEFT(name, CHAR_LENGTH(?)) = ?`,
	countHeld:   `SELECT count(*) FROM {{table}} WHERE LEFT(name, CHAR_LENGTH(?)) = ? AND expires_at > UTC_TIMESTAMP(6) AND expires_at < '9999-12-31'`,
	deleteFloor: `DELETE FROM ` + floorTable + ` WHERE LEFT(k, CHAR_LENGTH(?)) = ?`,
	open: func(u *url.URL, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (*sql.DB, error) {
		mc := mysql.NewConfig()
		if u.User != nil {
			mc.User = u.User.Username()
			mc.Passwd, _ = u.User.Password()
		}
		mc.Net, mc.Addr = "tcp", u.Host
		if u.Port() == "" {
			mc.Addr = net.JoinHostPort(u.Hostname(), "3306")
		}
		mc.DBName = strings.Trim(u.Path, "/")
		// One round trip per statement, as padlock's own client does.
		mc.InterpolateParams = true
		mc.DialFunc = dial
		conn, err := mysql.NewConnector(mc)
		if err != nil {
			return nil, err
		}
		return sql.OpenDB(conn), nil
	},
}

// args doubles a prefix argument for MySQL's LEFT(x, CHAR_LENGTH(?)) = ?.
func (d sqlDialect) prefixArgs(prefix string) []any {
	if d.backend == "mysql" {
		return []any{prefix, prefix}
	}
	return []any{prefix}
}

// sqlGroup benchmarks PostgreSQL or MySQL: padlock in lease and advisory
// modes, and the wire floors of both (no native peer is in wide use). Every
// client has its own connections, whose request turns are counted.
func sqlGroup(ctx context.Context, u *url.URL) (*Group, error) {
	d := postgresDialect
	if u.Scheme == mysqlpg.SchemeMySQL {
		d = mysqlDialect
	}
	q := u.Query()
	for _, k := range []string{"sslmode", "sslrootcert", "sslcert", "sslkey", "tls", "ca", "cert", "key", "password_file", "password_env"} {
		if q.Has(k) && !(k == "sslmode" && q.Get(k) == "disable") {
			// The floors' own connections take the URL's host, user,
			// password and database only: they would not match padlock's.
			return nil, fmt.Errorf("%w: %s=: the benchmark speaks neither TLS nor external passwords yet", padlock.ErrInvalidOption, k)
		}
	}
	table := mysqlpg.DefaultTable
	if t := q.Get("table"); t != "" {
		table = t
	}
	if strings.ContainsAny(table, "`\"' ;") {
		return nil, fmt.Errorf("%w: table=%q", padlock.ErrInvalidOption, table)
	}
	d.deleteRows = strings.ReplaceAll(d.deleteRows, "{{table}}", table)
	d.countHeld = strings.ReplaceAll(d.countHeld, "{{table}}", table)
	// padlock's lock table, made as `padlock migrate` would.
	if err := mysqlpg.Migrate(ctx, u.String()); err != nil {
		return nil, err
	}
	admin, err := d.open(u, nil)
	if err != nil {
		return nil, fmt.Errorf("bench: %s %s: %w", u.Scheme, u.Host, err)
	}
	fenced := fencedStatements[d.backend]
	for _, create := range []string{d.createFloor, fenced.create} {
		if _, err := admin.ExecContext(ctx, create); err != nil {
			admin.Close()
			return nil, fmt.Errorf("bench: %s %s: %w", u.Scheme, u.Host, err)
		}
	}
	// conn opens one pinned connection: advisory locks belong to it.
	conn := func(ctx context.Context, rt *Counter) (*sql.DB, *sql.Conn, error) {
		db, err := d.open(u, rt.Dial)
		if err != nil {
			return nil, nil, err
		}
		c, err := db.Conn(ctx)
		if err != nil {
			db.Close()
			return nil, nil, err
		}
		return db, c, nil
	}
	closer := func(db *sql.DB, c *sql.Conn) func() error {
		return func() error {
			c.Close()
			return db.Close()
		}
	}
	padlockImpl := func(name, mode string) Impl {
		return Impl{Name: name, Role: RolePadlock, MinRT: 2, Waits: true, Tokens: true, Recipes: allRecipes, New: func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
			v := *u
			q := v.Query()
			q.Set("mode", mode)
			v.RawQuery = q.Encode()
			l, err := padlock.Open(ctx, v.String(), padlock.WithDialer(rt.Dial))
			if err != nil {
				return nil, err
			}
			c := padlockClient(l, nil)
			c.prefix = prefix // the Locker has no prefix of its own
			return c, nil
		}}
	}
	g := &Group{Backend: d.backend, URL: redacted(u), Servers: []string{hostPort(u, d)}, Close: admin.Close}
	g.Impls = []Impl{
		{Name: "rtt", Role: RoleRTT, MinRT: 1, New: func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
			db, c, err := conn(ctx, rt)
			if err != nil {
				return nil, err
			}
			return funcClient{lock: func(ctx context.Context, name string) (Held, error) {
				var one int
				return Held{Release: noRelease}, c.QueryRowContext(ctx, "SELECT 1").Scan(&one)
			}, close: closer(db, c)}, nil
		}},
		{Name: "floor-advisory", Role: RoleFloor, MinRT: 2, New: func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
			db, c, err := conn(ctx, rt)
			if err != nil {
				return nil, err
			}
			return funcClient{lock: func(ctx context.Context, name string) (Held, error) {
				k := d.advisoryKey(prefix + name)
				// pg_advisory_lock returns nothing (void); GET_LOCK 1 when
				// granted, 0 or NULL when not.
				if d.backend == "mysql" {
					var got sql.NullInt64
					if err := c.QueryRowContext(ctx, d.advisoryLock, k).Scan(&got); err != nil {
						return Held{}, err
					}
					if got.Int64 != 1 {
						return Held{}, errBusy(name)
					}
				} else if _, err := c.ExecContext(ctx, d.advisoryLock, k); err != nil {
					return Held{}, err
				}
				return Held{Release: func(ctx context.Context) error {
					_, err := c.ExecContext(ctx, d.advUnlock, k)
					return err
				}}, nil
			}, close: closer(db, c)}, nil
		}},
		{Name: "floor-lease", Role: RoleFloor, MinRT: 2, New: func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
			db, c, err := conn(ctx, rt)
			if err != nil {
				return nil, err
			}
			return funcClient{lock: func(ctx context.Context, name string) (Held, error) {
				k, owner := prefix+name, newValue()
				r, err := c.ExecContext(ctx, d.leaseLock, k, owner)
				if err != nil {
					return Held{}, err
				}
				// PostgreSQL: 1 row inserted or taken over; MySQL: 1
				// inserted, 2 taken over, 0 held by another.
				if n, err := r.RowsAffected(); err != nil || n == 0 {
					return Held{}, errBusy(name)
				}
				return Held{Release: func(ctx context.Context) error {
					_, err := c.ExecContext(ctx, d.leaseUnlock, k, owner)
					return err
				}}, nil
			}, close: closer(db, c)}, nil
		}},
		padlockImpl("padlock", mysqlpg.ModeLease),
		padlockImpl("padlock-advisory", mysqlpg.ModeAdvisory),
	}
	g.Impls = append(g.Impls, sqlFencedImpls(d, fenced, conn)...)
	g.Impls = append(g.Impls, sqlRWImpls(d, conn)...)
	g.Impls = withBefore(g.Impls, func(im Impl) (func(ctx context.Context, rt *Counter, prefix string) (Client, error), bool) {
		mode := mysqlpg.ModeLease
		if im.Name == "padlock-advisory" {
			mode = mysqlpg.ModeAdvisory
		}
		return func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
			v := *u
			q := v.Query()
			q.Set("mode", mode)
			v.RawQuery = q.Encode()
			return beforeOpen(ctx, v.String(), rt.Dial, prefix)
		}, beforeOpen != nil
	})
	g.Leftover = func(ctx context.Context, prefix string) (int, error) {
		var held int
		if err := admin.QueryRowContext(ctx, d.countHeld, d.prefixArgs(prefix)...).Scan(&held); err != nil {
			return 0, err
		}
		// padlock keeps a released name's row, for its token: the reset
		// deletes it. Left behind is a lease still running (an advisory
		// lock ends with its session, and its row keeps the last holder).
		if _, err := admin.ExecContext(ctx, d.deleteRows, d.prefixArgs(prefix)...); err != nil {
			return held, err
		}
		r, err := admin.ExecContext(ctx, d.deleteFloor, d.prefixArgs(prefix)...)
		if err != nil {
			return held, err
		}
		n, _ := r.RowsAffected()
		held += int(n)
		// The fenced floors keep a released name's row too.
		var live int
		if err := admin.QueryRowContext(ctx, fenced.countLive, d.prefixArgs(prefix)...).Scan(&live); err != nil {
			return held, err
		}
		_, err = admin.ExecContext(ctx, fenced.drop, d.prefixArgs(prefix)...)
		return held + live, err
	}
	return g, nil
}

func hostPort(u *url.URL, d sqlDialect) string {
	if u.Port() != "" {
		return u.Host
	}
	if d.backend == "mysql" {
		return net.JoinHostPort(u.Hostname(), "3306")
	}
	return net.JoinHostPort(u.Hostname(), "5432")
}
