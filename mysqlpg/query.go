package mysqlpg

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5/stdlib"
)

// queryRow runs a statement that answers one row on q (the pool or one of
// its connections) and scans the row into dest. On PostgreSQL it goes to
// pgx directly: database/sql starts a goroutine for every query whose
// context can end, to close its rows when it does, and on the hot paths
// (a grant, a release) that goroutine, its start and its wake-up were the
// largest cost of the client after the network (bench/mysqlpg's
// BenchmarkUncontended measures it); pgx watches the context without one.
// MySQL's statements go through database/sql.
func queryRow(ctx context.Context, d *dialect, q querier, query string, args []any, dest ...any) error {
	if d == postgres {
		switch c := q.(type) {
		case *sql.Conn:
			return pgxRow(ctx, c, query, args, dest)
		case *sql.DB:
			conn, err := c.Conn(ctx)
			if err != nil {
				return err
			}
			defer conn.Close()
			return pgxRow(ctx, conn, query, args, dest)
		}
	}
	return q.QueryRowContext(ctx, query, args...).Scan(dest...)
}

// pgxRow runs query on c's pgx connection and scans its one row into
// dest (pgx.ErrNoRows, which is sql.ErrNoRows to errors.Is, if none).
func pgxRow(ctx context.Context, c *sql.Conn, query string, args, dest []any) error {
	return c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("mysqlpg: a PostgreSQL connection of type %T, not pgx's", dc)
		}
		return sc.Conn().QueryRow(ctx, query, args...).Scan(dest...)
	})
}
