package fence

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// CheckPgx is Check on a pgx transaction, for programs that use pgx
// natively (a PostgreSQL table only). With pgx.BeginFunc it is Do:
//
//	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
//		if err := fence.PostgresTable.CheckPgx(ctx, tx, "orders/42", lk.Token()); err != nil {
//			return err // errors.Is(err, fence.ErrStale): rolled back
//		}
//		_, err := tx.Exec(ctx, "UPDATE orders SET state = 'paid' WHERE id = 42")
//		return err
//	})
func (t *Table) CheckPgx(ctx context.Context, tx pgx.Tx, resource string, token uint64) error {
	if err := check(resource, token); err != nil {
		return err
	}
	if t.dialect != Postgres {
		return invalid("CheckPgx needs a %s table, not %s", Postgres, t.dialect)
	}
	if tx == nil {
		return invalid("CheckPgx needs a pgx.Tx")
	}
	var got int64
	err := tx.QueryRow(ctx, t.record, resource, int64(token)).Scan(&got)
	if err == nil {
		return nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return t.fail("record", err)
	}
	var highest int64
	if err := tx.QueryRow(ctx, t.highest, resource).Scan(&highest); err != nil {
		return t.fail("read", err)
	}
	return stale(resource, token, uint64(highest))
}
