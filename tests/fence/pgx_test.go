package fence_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/padlock-go/padlock/fence"
)

// testPgx checks CheckPgx in pgx.BeginFunc, on the table TestSQL made.
func testPgx(t *testing.T, url string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tb, _ := fence.NewTable(fence.Postgres, "fence_tokens_test")
	write := func(token uint64, value int64) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if err := tb.CheckPgx(ctx, tx, "pgx/1", token); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO fence_values (resource, value) VALUES ('pgx/1', $1) ON CONFLICT (resource) DO UPDATE SET value = EXCLUDED.value", value)
			return err
		})
	}
	if err := write(4, 1); err != nil {
		t.Fatal(err)
	}
	if err := write(4, 2); err != nil {
		t.Fatal(err)
	}
	var se *fence.StaleError
	if err := write(3, 3); !errors.As(err, &se) || se.Highest != 4 {
		t.Errorf("CheckPgx(stale) = %v, want a StaleError with highest 4", err)
	}
	var v int64
	if err := conn.QueryRow(ctx, "SELECT value FROM fence_values WHERE resource = 'pgx/1'").Scan(&v); err != nil || v != 2 {
		t.Errorf("value %d, %v; want 2", v, err)
	}
	if err := fence.MySQLTable.CheckPgx(ctx, nil, "pgx/1", 1); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("CheckPgx on a MySQL table = %v, want ErrInvalid", err)
	}
}
