// Package mysqlpg_test tests padlock's PostgreSQL and MariaDB (mysqlpg)
// backend against real servers.
// Its files are laid out as every backend's under tests/ (docs/testing.md,
// "Where tests live"): main_test.go starts the servers the package shares,
// harness_test.go holds the conformance harness and the helpers the files
// share, conformance_test.go runs the conformance suite, open_test.go
// checks Open, URLs and refused connections, faults_test.go the
// backend's own faults, features_test.go its own behaviour, and
// tls_test.go TLS.
package mysqlpg_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	_ "github.com/padlock-go/padlock/mysqlpg"
	"github.com/padlock-go/padlock/padlocktest"
)

// The package's tests share one PostgreSQL and one MariaDB server; each
// harness works in its own table.
var (
	pg       *padlocktest.Server
	maria    *padlocktest.Server
	startErr error
	serial   atomic.Int64
)

func TestMain(m *testing.M) {
	padlocktest.Main(m, func(ctx context.Context) (func(), error) {
		stop := func() {
			if pg != nil {
				pg.Close()
			}
			if maria != nil {
				maria.Close()
			}
		}
		errs := make(chan error, 2)
		go func() {
			var err error
			pg, err = padlocktest.New(ctx, padlocktest.Postgres)
			errs <- err
		}()
		go func() {
			var err error
			maria, err = padlocktest.New(ctx, padlocktest.MySQL)
			errs <- err
		}()
		startErr = errors.Join(<-errs, <-errs)
		return stop, startErr
	})
}
