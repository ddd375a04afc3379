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
	"fmt"
	"os"
	"slices"
	"strings"
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

// databasesEnv names the databases a run of the package tests, as a
// comma-separated list of "postgres" and "mysql" (both when unset). Every
// test that runs on a database runs on the ones named and no others, and
// only their servers are started: scripts/test runs the package twice at
// once, one process a database, since the two share nothing and one
// process for both was the suite's longest by far.
const databasesEnv = "PADLOCK_SQL_DATABASES"

// databases is what databasesEnv names, or an error that says what is
// wrong with it.
func databases() ([]string, error) {
	v := os.Getenv(databasesEnv)
	if v == "" {
		return []string{"postgres", "mysql"}, nil
	}
	var dbs []string
	for _, d := range strings.Split(v, ",") {
		if d = strings.TrimSpace(d); d != "postgres" && d != "mysql" || slices.Contains(dbs, d) {
			return nil, fmt.Errorf("%s=%q: want a list of postgres and mysql, each once", databasesEnv, v)
		}
		dbs = append(dbs, d)
	}
	return dbs, nil
}

// testsDatabase says whether this run tests the database kind.
func testsDatabase(kind string) bool {
	dbs, err := databases()
	return err == nil && slices.Contains(dbs, kind)
}

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
		dbs, err := databases()
		if err != nil {
			startErr = err
			return stop, err
		}
		errs := make(chan error, 2)
		go func() {
			var err error
			if slices.Contains(dbs, "postgres") {
				pg, err = padlocktest.New(ctx, padlocktest.Postgres)
			}
			errs <- err
		}()
		go func() {
			var err error
			if slices.Contains(dbs, "mysql") {
				maria, err = padlocktest.New(ctx, padlocktest.MySQL)
			}
			errs <- err
		}()
		startErr = errors.Join(<-errs, <-errs)
		return stop, startErr
	})
}
