package fence

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Dialect is a SQL database's dialect.
type Dialect string

// The dialects Table speaks.
const (
	// Postgres is PostgreSQL, through database/sql (the pgx stdlib driver
	// or lib/pq) or natively through pgx (CheckPgx).
	Postgres Dialect = "postgres"
	// MySQL is MySQL and MariaDB, through database/sql
	// (github.com/go-sql-driver/mysql).
	MySQL Dialect = "mysql"
)

// DefaultTable is the token table's name unless NewTable is given another:
// beside padlock's own lock table (padlock_locks), in the same style.
const DefaultTable = "padlock_fence"

// The token tables of the common case, named DefaultTable.
var (
	PostgresTable = mustTable(Postgres, DefaultTable)
	MySQLTable    = mustTable(MySQL, DefaultTable)
)

//go:embed sql
var sqlFiles embed.FS

// identifier is a table name Table takes: letters, digits and
// underscores, not starting with a digit, at most 63 bytes (PostgreSQL's
// limit; MySQL's is 64), optionally qualified by a schema ("app.fence").
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$`)

// Table is a SQL token table: one row per resource, holding the highest
// token seen for it (schema: Schema; DDL files: sql/<dialect>/schema.sql).
// Its checks run inside the caller's transaction, so that the check and the
// caller's write commit together or not at all. A Table is immutable and
// safe for concurrent use.
type Table struct {
	dialect                 Dialect
	name                    string
	schema, record, highest string
}

// NewTable returns the token table name in dialect's database. It returns
// ErrInvalid for an unknown dialect or a name that is not a plain
// identifier (optionally schema.table).
func NewTable(dialect Dialect, name string) (*Table, error) {
	if dialect != Postgres && dialect != MySQL {
		return nil, invalid("unknown SQL dialect %q (want %q or %q)", dialect, Postgres, MySQL)
	}
	if !identifier.MatchString(name) {
		return nil, invalid("table name %q is not an identifier (letters, digits, _; at most 63 bytes; optionally schema.table)", name)
	}
	q := `"`
	if dialect == MySQL {
		q = "`"
	}
	quoted := q + strings.ReplaceAll(name, ".", q+"."+q) + q
	t := &Table{dialect: dialect, name: name}
	for _, s := range []struct {
		file string
		to   *string
	}{{"schema", &t.schema}, {"record", &t.record}, {"highest", &t.highest}} {
		b, err := sqlFiles.ReadFile("sql/" + string(dialect) + "/" + s.file + ".sql")
		if err != nil {
			return nil, fmt.Errorf("fence: %w", err) // not reached: the files are embedded
		}
		*s.to = strings.TrimSpace(strings.ReplaceAll(string(b), "{{table}}", quoted))
	}
	return t, nil
}

func mustTable(d Dialect, name string) *Table {
	t, err := NewTable(d, name)
	if err != nil {
		panic(err)
	}
	return t
}

// Dialect returns the table's dialect.
func (t *Table) Dialect() Dialect { return t.dialect }

// Name returns the table's name.
func (t *Table) Name() string { return t.name }

// Schema returns the CREATE TABLE IF NOT EXISTS statement of the table,
// with its comments, for teams that review and apply DDL themselves.
func (t *Table) Schema() string { return t.schema }

// Migrate creates the table unless it exists. Run it once, as a user that
// may create tables; Check and Do never create it.
func (t *Table) Migrate(ctx context.Context, db *sql.DB) error {
	if db == nil {
		return invalid("Migrate needs a *sql.DB")
	}
	if _, err := db.ExecContext(ctx, t.schema); err != nil {
		return fmt.Errorf("fence: create table %s: %w", t.name, err)
	}
	return nil
}

// Check records token for resource in tx, and returns a *StaleError
// (errors.Is ErrStale) when a higher token is recorded. It locks the
// resource's row until tx ends, so that a newer token's check waits for
// this transaction, and an older one's after it commits is refused: write
// in tx after Check, and roll tx back when Check fails. Equal tokens are
// accepted (one holder may write many times). The row is created on a
// resource's first token and never deleted.
func (t *Table) Check(ctx context.Context, tx *sql.Tx, resource string, token uint64) error {
	if err := check(resource, token); err != nil {
		return err
	}
	if tx == nil {
		return invalid("Check needs a *sql.Tx")
	}
	var highest uint64
	switch t.dialect {
	case Postgres:
		var got int64
		err := tx.QueryRowContext(ctx, t.record, resource, int64(token)).Scan(&got)
		if err == nil {
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return t.fail("record", err)
		}
		if err := tx.QueryRowContext(ctx, t.highest, resource).Scan(&highest); err != nil {
			return t.fail("read", err)
		}
	default:
		if _, err := tx.ExecContext(ctx, t.record, resource, token); err != nil {
			return t.fail("record", err)
		}
		if err := tx.QueryRowContext(ctx, t.highest, resource).Scan(&highest); err != nil {
			return t.fail("read", err)
		}
		if highest <= token {
			return nil
		}
	}
	return stale(resource, token, highest)
}

func (t *Table) fail(what string, err error) error {
	return fmt.Errorf("fence: %s token in %s: %w", what, t.name, err)
}

// Do runs fn in a transaction on db after Check(resource, token) accepted
// the token, and commits. When Check refuses, fn does not run, the
// transaction is rolled back and Do returns the *StaleError (errors.Is
// ErrStale); when fn fails, the transaction is rolled back and Do returns
// fn's error; when fn panics, the transaction is rolled back and the
// panic goes on. fn must not commit or roll back tx itself. Do does not
// retry: a deadlock or serialization failure is returned as the database
// reported it.
func (t *Table) Do(ctx context.Context, db *sql.DB, resource string, token uint64, fn func(tx *sql.Tx) error) (err error) {
	if err := check(resource, token); err != nil {
		return err
	}
	if db == nil {
		return invalid("Do needs a *sql.DB")
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("fence: begin: %w", err)
	}
	defer func() {
		if p := recover(); p != nil {
			// fn panicked: the transaction, which holds the resource's
			// row, must not stay open behind a recovery upstream (an HTTP
			// server's), blocking every later Check of the resource.
			tx.Rollback()
			panic(p)
		}
		if err != nil {
			tx.Rollback() // its error is not the caller's news: err is
		}
	}()
	if err := t.Check(ctx, tx, resource, token); err != nil {
		return err
	}
	if fn != nil {
		if err := fn(tx); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("fence: commit: %w", err)
	}
	return nil
}

// Store returns the table on db as a Store (each Record a transaction of
// its own), for the HTTP middleware.
func (t *Table) Store(db *sql.DB) Store {
	return StoreFunc(func(ctx context.Context, resource string, token uint64) error {
		return t.Do(ctx, db, resource, token, nil)
	})
}
