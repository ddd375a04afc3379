package mysqlpg_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/mysqlpg"
	"github.com/padlock-go/padlock/padlocktest"
)

const (
	appPassword  = "app-Pw-5d1e"
	nonePassword = "none-Pw-c3a9"
)

// tlsDB is a database server that takes TCP connections over TLS only
// and requires a client certificate from the test CA, with two users
// besides the harness's own:
//   - padlock_app may connect, and only read and write the lock tables
//     that grant gives it (the least privilege docs/security.md lists);
//   - padlock_none may connect and nothing else.
type tlsDB struct {
	srv      server
	certs    *padlocktest.Certs
	adminURL string // padlock URL of a user who may create tables
	pwFile   string // padlock_app's password
	// grant gives padlock_app what it needs on table.
	grant func(ctx context.Context, admin *sql.DB, table string) error
}

// startTLSDBs starts a TLS PostgreSQL and a TLS MariaDB for one test.
func startTLSDBs(t *testing.T) []*tlsDB {
	t.Helper()
	servers(t) // skips (or, with PADLOCK_REQUIRE_SERVERS, fails) without the packages
	certs, pwFile := padlocktest.NewCerts(t), padlocktest.SecretFile(t, appPassword)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var (
		p    *padlocktest.Server
		m    *padlocktest.Server
		errs = make(chan error, 2)
	)
	go func() {
		var err error
		p, err = padlocktest.New(ctx, padlocktest.Postgres, padlocktest.TLS(certs))
		errs <- err
	}()
	go func() {
		var err error
		m, err = padlocktest.New(ctx, padlocktest.MySQL, padlocktest.TLS(certs))
		errs <- err
	}()
	err := errors.Join(<-errs, <-errs)
	if p != nil {
		t.Cleanup(p.Close)
	}
	if m != nil {
		t.Cleanup(m.Close)
	}
	if err != nil {
		t.Fatalf("TLS database servers: %v", err)
	}
	pgDB := &tlsDB{certs: certs, pwFile: pwFile, adminURL: p.AdminURL(),
		srv: postgresServer(p, appURL("postgres", p.Addrs(), certs, pwFile)),
		grant: func(ctx context.Context, admin *sql.DB, table string) error {
			_, err := admin.ExecContext(ctx, fmt.Sprintf(`GRANT SELECT, INSERT, UPDATE ON %q TO padlock_app`, table))
			return err
		}}
	myDB := &tlsDB{certs: certs, pwFile: pwFile, adminURL: m.AdminURL(),
		srv: mysqlServer(m, appURL("mysql", m.Addrs(), certs, pwFile)),
		grant: func(ctx context.Context, admin *sql.DB, table string) error {
			_, err := admin.ExecContext(ctx, fmt.Sprintf("GRANT SELECT, INSERT, UPDATE ON padlock.`%s` TO 'padlock_app'@'%%'", table))
			return err
		}}
	for _, db := range []*tlsDB{pgDB, myDB} {
		admin, err := db.srv.adminDB()
		if err != nil {
			t.Fatal(err)
		}
		stmts := []string{
			"CREATE ROLE padlock_app LOGIN PASSWORD '" + padlocktest.PostgresPassword(appPassword) + "'",
			"GRANT CONNECT ON DATABASE padlock TO padlock_app",
			"CREATE ROLE padlock_none LOGIN PASSWORD '" + padlocktest.PostgresPassword(nonePassword) + "'",
		}
		if db.srv.kind == "mysql" {
			stmts = []string{
				"CREATE USER 'padlock_app'@'%' IDENTIFIED BY '" + appPassword + "' REQUIRE X509",
				"CREATE USER 'padlock_none'@'%' IDENTIFIED BY '" + nonePassword + "' REQUIRE X509",
			}
		}
		for _, q := range stmts {
			if _, err := admin.ExecContext(ctx, q); err != nil {
				admin.Close()
				t.Fatalf("%s: %s: %v", db.srv.kind, q, err)
			}
		}
		admin.Close()
	}
	return []*tlsDB{pgDB, myDB}
}

// appURL is padlock_app's URL with padlock's own TLS parameters and the
// password in a file.
func appURL(scheme, addr string, c *padlocktest.Certs, pwFile string) string {
	q := url.Values{"ca": {c.CA}, "cert": {c.ClientCert}, "key": {c.ClientKey}, "password_file": {pwFile}}
	return (&url.URL{Scheme: scheme, User: url.User("padlock_app"), Host: addr, Path: "/padlock", RawQuery: q.Encode()}).String()
}

// prepare makes table as the administrator (padlock migrate) and grants
// padlock_app its least privileges on it.
func (db *tlsDB) prepare(t *testing.T, table string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := mysqlpg.Migrate(ctx, db.adminURL+"&table="+url.QueryEscape(table)); err != nil {
		t.Fatalf("migrate %s: %v", table, err)
	}
	admin, err := db.srv.adminDB()
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := db.grant(ctx, admin, table); err != nil {
		t.Fatalf("grant on %s: %v", table, err)
	}
}

// A tls.Config the application built (padlock.WithTLSConfig) stands in for
// the URL's certificate files, on both databases.
func TestWithTLSConfig(t *testing.T) {
	dbs := startTLSDBs(t)
	cfg, err := dbs[0].certs.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	cfg.ServerName = "" // the host is verified
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, db := range dbs {
		t.Run(db.srv.kind, func(t *testing.T) {
			table := fmt.Sprintf("padlock_own%d", serial.Add(1))
			db.prepare(t, table)
			u, err := url.Parse(db.srv.url)
			if err != nil {
				t.Fatal(err)
			}
			u.RawQuery = url.Values{"password_file": {db.pwFile}, "table": {table}}.Encode()
			l, err := padlock.Open(ctx, u.String(), padlock.WithTLSConfig(cfg))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			conformance.Cycle(ctx, t, l, "a")
		})
	}
}
