package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/padlock-go/padlock/fence"
	"github.com/padlock-go/padlock/padlocktest"
)

// sqlCase is one database under test.
type sqlCase struct {
	name    string
	srv     **padlocktest.Server
	dialect fence.Dialect
	open    func(s *padlocktest.Server) (*sql.DB, error)
	upsert  string // sets the test's value table's row: resource, value
}

var sqlCases = []sqlCase{
	{"postgres", &pg, fence.Postgres, func(s *padlocktest.Server) (*sql.DB, error) { return sql.Open("pgx", s.AdminURL()) },
		`INSERT INTO fence_values (resource, value) VALUES ($1, $2) ON CONFLICT (resource) DO UPDATE SET value = EXCLUDED.value`},
	{"mysql", &maria, fence.MySQL, func(s *padlocktest.Server) (*sql.DB, error) { return sql.Open("mysql", s.AdminDSN()) },
		`INSERT INTO fence_values (resource, value) VALUES (?, ?) ON DUPLICATE KEY UPDATE value = VALUES(value)`},
}

// sqlRegister is a register in the value table fence_values, written by
// Table.Do, or by CheckPgx when pgx is set.
func sqlRegister(db *sql.DB, tb *fence.Table, c sqlCase) register {
	q := "SELECT value FROM fence_values WHERE resource = ?"
	if c.dialect == fence.Postgres {
		q = "SELECT value FROM fence_values WHERE resource = $1"
	}
	return register{
		write: func(ctx context.Context, resource string, token uint64, value int64) error {
			return tb.Do(ctx, db, resource, token, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, c.upsert, resource, value)
				return err
			})
		},
		read: func(ctx context.Context, resource string) (int64, error) {
			var v int64
			err := db.QueryRowContext(ctx, q, resource).Scan(&v)
			if errors.Is(err, sql.ErrNoRows) {
				return 0, nil
			}
			return v, err
		},
	}
}

func TestSQL(t *testing.T) {
	for _, c := range sqlCases {
		t.Run(c.name, func(t *testing.T) {
			need(t, *c.srv)
			ctx := context.Background()
			db, err := c.open(*c.srv)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			tb, err := fence.NewTable(c.dialect, "fence_tokens_test")
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{"DROP TABLE IF EXISTS fence_tokens_test", "DROP TABLE IF EXISTS fence_values",
				"CREATE TABLE fence_values (resource varchar(255) PRIMARY KEY, value bigint NOT NULL)"} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			// Migrate twice: the second finds the table.
			for range 2 {
				if err := tb.Migrate(ctx, db); err != nil {
					t.Fatal(err)
				}
			}
			r := sqlRegister(db, tb, c)
			t.Run("basics", func(t *testing.T) { checkBasics(t, r, "orders/1") })
			t.Run("concurrent", func(t *testing.T) {
				// The resource's first token alone first: concurrent first
				// inserts of one row are a separate matter (below).
				if err := r.write(ctx, "orders/2", 1, 0); err != nil {
					t.Fatal(err)
				}
				checkConcurrent(t, r, "orders/2")
			})
			t.Run("concurrent first use", func(t *testing.T) {
				// Writers racing to make a resource's row: each is accepted
				// or refused as stale, none fails otherwise.
				var wg sync.WaitGroup
				for i := range 6 {
					wg.Go(func() {
						err := r.write(ctx, "orders/5", uint64(i+1), int64(i))
						if err != nil && !errors.Is(err, fence.ErrStale) {
							t.Errorf("token %d: %v", i+1, err)
						}
					})
				}
				wg.Wait()
			})
			t.Run("fn error rolls back", func(t *testing.T) {
				boom := errors.New("boom")
				err := tb.Do(ctx, db, "orders/3", 9, func(tx *sql.Tx) error {
					if _, err := tx.ExecContext(ctx, c.upsert, "orders/3", 99); err != nil {
						return err
					}
					return boom
				})
				if !errors.Is(err, boom) {
					t.Fatalf("Do = %v, want fn's error", err)
				}
				// Neither the token nor the write stayed: token 1 is accepted.
				if err := r.write(ctx, "orders/3", 1, 1); err != nil {
					t.Errorf("after a rolled-back Do with token 9, token 1: %v", err)
				}
				if v, _ := r.read(ctx, "orders/3"); v != 1 {
					t.Errorf("value %d, want 1: the rolled-back write stayed", v)
				}
			})
			t.Run("fn panic rolls back", func(t *testing.T) {
				// A panic in fn, recovered upstream (an HTTP server's
				// recovery): the transaction, which held the resource's
				// row, is over, and the next writer of the resource is not
				// held up by it.
				func() {
					defer func() {
						if p := recover(); p != "boom" {
							t.Errorf("recovered %v, want fn's panic", p)
						}
					}()
					tb.Do(ctx, db, "orders/6", 9, func(tx *sql.Tx) error {
						if _, err := tx.ExecContext(ctx, c.upsert, "orders/6", 99); err != nil {
							return err
						}
						panic("boom")
					})
				}()
				wctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				if err := r.write(wctx, "orders/6", 1, 1); err != nil {
					t.Fatalf("after a Do whose fn panicked, token 1: %v (the panicked transaction still holds the row?)", err)
				}
				if v, _ := r.read(ctx, "orders/6"); v != 1 {
					t.Errorf("value %d, want 1: the panicked write stayed", v)
				}
			})
			t.Run("stale runs no fn", func(t *testing.T) {
				ran := false
				err := tb.Do(ctx, db, "orders/1", 2, func(*sql.Tx) error { ran = true; return nil })
				if !errors.Is(err, fence.ErrStale) || ran {
					t.Errorf("Do(stale) = %v, fn ran: %v", err, ran)
				}
			})
			t.Run("store", func(t *testing.T) {
				st := tb.Store(db)
				if err := st.Record(ctx, "orders/4", 3); err != nil {
					t.Fatal(err)
				}
				if err := st.Record(ctx, "orders/4", 2); !errors.Is(err, fence.ErrStale) {
					t.Errorf("Store.Record(stale) = %v, want ErrStale", err)
				}
			})
			t.Run("no table", func(t *testing.T) {
				missing, _ := fence.NewTable(c.dialect, "fence_no_such_table")
				if err := missing.Do(ctx, db, "orders/1", 1, nil); err == nil || errors.Is(err, fence.ErrStale) {
					t.Errorf("Do on a missing table = %v, want the database's error", err)
				}
			})
			if c.dialect == fence.Postgres {
				t.Run("pgx", func(t *testing.T) { testPgx(t, (*c.srv).AdminURL()) })
			}
			// Nothing but one row per resource used.
			rows, err := db.QueryContext(ctx, "SELECT resource FROM fence_tokens_test ORDER BY resource")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var got []string
			for rows.Next() {
				var s string
				rows.Scan(&s)
				got = append(got, s)
			}
			want := []string{"orders/1", "orders/2", "orders/3", "orders/4", "orders/5", "orders/6"}
			if c.dialect == fence.Postgres {
				want = append(want, "pgx/1")
			}
			if !slices.Equal(got, want) {
				t.Errorf("token rows %q, want %q", got, want)
			}
		})
	}
}
