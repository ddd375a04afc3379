package mysqlpg_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/mysqlpg"
)

func TestOpenErrors(t *testing.T) {
	conformance.CheckOpenErrors(t, []conformance.OpenCase{
		{URL: "postgres://u@127.0.0.1:1/db?bogus=1", Want: padlock.ErrInvalidOption,
			Msg: `"bogus" for postgres:// (known: ttl, wait, mode, table, pool_max_conns, dial_timeout, request_timeout, password_file, password_env, ca, cert, key, server_name, sslmode, sslrootcert, sslcert, sslkey, sslpassword, sslsni, application_name, target_session_attrs)`},
		{URL: "mysql://u@127.0.0.1:1/db?sslmode=disable", Want: padlock.ErrInvalidOption,
			Msg: `"sslmode" for mysql:// (known: ttl, wait, mode, table, pool_max_conns, dial_timeout, request_timeout, password_file, password_env, ca, cert, key, server_name, tls, application_name)`},
		{URL: "postgres://u@127.0.0.1:1/db?ca=/nonexistent/ca.pem", Want: padlock.ErrInvalidOption, Msg: "ca=/nonexistent/ca.pem"},
		{URL: "postgres://u@127.0.0.1:1/db?server_name=db&sslmode=require", Want: padlock.ErrInvalidOption, Msg: "give TLS one way"},
		{URL: "mysql://u:s3cret@127.0.0.1:1/db?password_file=/tmp/pw", Want: padlock.ErrInvalidOption, Msg: "at once"},
		{URL: "postgresql://u@127.0.0.1:1/db?mode=exclusive", Want: padlock.ErrInvalidOption, Msg: "want lease or advisory"},
		{URL: "postgres://u@127.0.0.1:1/db?table=a.b.c", Want: padlock.ErrInvalidOption, Msg: "more than one dot"},
		{URL: "postgres://u@127.0.0.1:1/db?table=a.", Want: padlock.ErrInvalidOption, Msg: "empty part"},
		{URL: "postgres://u@127.0.0.1:1/db?table=" + strings.Repeat("x", 64), Want: padlock.ErrInvalidOption, Msg: "longer than 63 bytes"},
		{URL: "mysql://u@127.0.0.1:1/db?table=" + strings.Repeat("x", 65), Want: padlock.ErrInvalidOption, Msg: "longer than 64 bytes"},
		{URL: "mysql://u@127.0.0.1:1/db?pool_max_conns=0", Want: padlock.ErrInvalidOption, Msg: "pool_max_conns"},
		{URL: "mysql://u@127.0.0.1:1/db?tls=maybe", Want: padlock.ErrInvalidOption, Msg: "tls"},
		{URL: "mysql://u@127.0.0.1:1/db?application_name=a,b", Want: padlock.ErrInvalidOption, Msg: "application_name"},
		{URL: "mysql://u@127.0.0.1:1,127.0.0.1:2/db", Want: padlock.ErrInvalidURL, Msg: "one host"},
		{URL: "postgres://u@127.0.0.1:1,127.0.0.1:1/db", Want: padlock.ErrInvalidURL, Msg: "appears twice"},
		{URL: "postgres://u@127.0.0.1:1", Want: padlock.ErrInvalidURL, Msg: "needs a database name"},
		{URL: "mysql:///db", Want: padlock.ErrInvalidURL, Msg: "host:port"},
		{URL: "postgres://u:secret@127.0.0.1:1/db?dial_timeout=1s", Want: padlock.ErrUnavailable, Msg: "connection refused"},
		{URL: "mysql://u:secret@127.0.0.1:1/db?dial_timeout=1s", Want: padlock.ErrUnavailable, Msg: "connection refused"},
	})
}

// A password never appears in Open's errors.
func TestOpenErrorsHidePassword(t *testing.T) {
	for _, u := range []string{
		"postgres://u:s3cr3tpw@127.0.0.1:1/db?dial_timeout=1s",
		"mysql://u:s3cr3tpw@127.0.0.1:1/db?dial_timeout=1s",
		"postgres://u:s3cr3tpw@127.0.0.1:1/db?bogus=1",
		"postgres://u:s3cr3tpw@127.0.0.1:99999/db",
	} {
		_, err := padlock.Open(context.Background(), u)
		if err == nil || strings.Contains(err.Error(), "s3cr3tpw") {
			t.Errorf("Open(%q) = %v", u, err)
		}
		if err := mysqlpg.Migrate(context.Background(), u); err == nil || strings.Contains(err.Error(), "s3cr3tpw") {
			t.Errorf("Migrate(%q) = %v", u, err)
		}
	}
}

// TestMigrate makes the table with Migrate, as a deployment step with DDL
// rights would, then opens as a user who may only read and write it.
func TestMigrate(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) {
			h := newHarness(t, srv, mysqlpg.ModeLease)
			defer h.Close()
			ctx := context.Background()
			admin := h.url(srv.addr, nil)
			ddl, err := mysqlpg.Schema(admin)
			if err != nil || !strings.Contains(ddl, "CREATE TABLE IF NOT EXISTS") || !strings.Contains(ddl, h.table) {
				t.Fatalf("Schema = %q, %v", ddl, err)
			}
			if err := mysqlpg.Migrate(ctx, admin); err != nil {
				t.Fatal(err)
			}
			if err := mysqlpg.Migrate(ctx, admin); err != nil {
				t.Fatalf("second Migrate: %v", err)
			}
			// A user with only SELECT, INSERT and UPDATE on the table.
			user := "padlock_rw_" + strings.TrimPrefix(h.table, "padlock_")
			grants := []string{
				`CREATE ROLE ` + user + ` LOGIN PASSWORD 'rw'`,
				`GRANT CONNECT ON DATABASE padlock TO ` + user,
				`GRANT USAGE ON SCHEMA public TO ` + user,
				`GRANT SELECT, INSERT, UPDATE ON ` + h.quoted() + ` TO ` + user,
			}
			if srv.kind == "mysql" {
				grants = []string{
					`CREATE USER '` + user + `'@'%' IDENTIFIED BY 'rw'`,
					`GRANT SELECT, INSERT, UPDATE ON padlock.` + h.quoted() + ` TO '` + user + `'@'%'`,
				}
			}
			for _, g := range grants {
				if _, err := h.admin.ExecContext(ctx, g); err != nil {
					t.Fatal(g, err)
				}
			}
			for _, mode := range []string{mysqlpg.ModeLease, mysqlpg.ModeAdvisory} {
				u := strings.Replace(h.url(srv.addr, map[string][]string{"mode": {mode}}), "padlock:padlock@", user+":rw@", 1)
				l, err := padlock.Open(ctx, u)
				if err != nil {
					t.Fatalf("%s: Open as a user without DDL rights: %v", mode, err)
				}
				lk, err := l.Lock(ctx, "migrated-"+mode)
				if err != nil {
					t.Fatalf("%s: %v", mode, err)
				}
				if err := lk.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				l.Close()
			}
			// Without the table and without DDL rights, Open says so.
			h2 := newHarness(t, srv, mysqlpg.ModeLease)
			defer h2.Close()
			u := strings.Replace(h2.url(srv.addr, nil), "padlock:padlock@", user+":rw@", 1)
			if _, err := padlock.Open(ctx, u); err == nil || errors.Is(err, padlock.ErrUnavailable) || !strings.Contains(err.Error(), "create lock table") {
				t.Errorf("Open of a missing table without DDL rights = %v, want the CREATE's refusal", err)
			}
		})
	}
}

// A lock table made before the holder column existed gets it when a
// Locker opens it, and Holders then shows the reentrancy owner.
func TestHolderColumnAdded(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) {
			h := newHarness(t, srv, mysqlpg.ModeLease)
			defer h.Close()
			ctx := context.Background()
			ddl, err := mysqlpg.Schema(h.url(h.srv.addr, nil))
			if err != nil {
				t.Fatal(err)
			}
			var old []string
			for _, line := range strings.Split(ddl, "\n") {
				if !strings.Contains(line, "holder ") {
					old = append(old, line)
				}
			}
			if _, err := h.admin.ExecContext(ctx, strings.Join(old, "\n")); err != nil {
				t.Fatalf("old table: %v", err)
			}
			if srv.kind == "postgres" {
				// Only a table's owner may alter it: an administrator's
				// table cannot be upgraded by padlock's user...
				if _, err := padlock.Open(ctx, h.url(h.srv.addr, nil)); err == nil || !strings.Contains(err.Error(), "padlock migrate") {
					t.Fatalf("Open on an old table padlock may not alter = %v, want an error naming padlock migrate", err)
				}
				// ...until it is theirs.
				u, _ := url.Parse(srv.url)
				if _, err := h.admin.ExecContext(ctx, fmt.Sprintf("ALTER TABLE %s OWNER TO %q", h.quoted(), u.User.Username())); err != nil {
					t.Fatal(err)
				}
			}
			l := h.open(t)
			lk, err := l.Lock(padlock.WithOwner(ctx, "batch"), "old-table")
			if err != nil {
				t.Fatal(err)
			}
			hs, err := l.Holders(ctx, "")
			if err != nil || len(hs) != 1 || hs[0].Owner != "batch" || hs[0].Token != lk.Token() {
				t.Errorf("Holders on a migrated table = %+v, %v", hs, err)
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
