package mysqlpg_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/mysqlpg"
	"github.com/padlock-go/padlock/padlocktest"
)

// Two spellings of one table (table=t and schema.t) must share locks, in
// advisory mode (the lock keys) and in lease mode (the NOTIFY channel).
func TestTableSpellings(t *testing.T) {
	for _, mode := range []string{mysqlpg.ModeAdvisory, mysqlpg.ModeLease} {
		for _, srv := range servers(t) {
			t.Run(srv.kind+"/"+mode, func(t *testing.T) {
				ctx := context.Background()
				h := newHarness(t, srv, mode)
				defer h.Close()
				a := h.open(t, padlock.WithTTL(time.Minute))
				schema := "public"
				if srv.kind == "mysql" {
					schema = "padlock"
				}
				h2 := newHarness(t, srv, mode)
				defer h2.Close()
				h2.table = schema + "." + h.table
				b := h2.open(t, padlock.WithTTL(time.Minute))
				x, err := a.Lock(ctx, "x")
				if err != nil {
					t.Fatal(err)
				}
				if lk, err := b.TryLock(ctx, "x"); !errors.Is(err, padlock.ErrNotAcquired) {
					if err == nil {
						lk.Unlock(ctx)
					}
					t.Fatalf("TryLock through %s while %s holds: %v, want ErrNotAcquired", h2.table, h.table, err)
				}
				// A waiter through the other spelling is woken by the
				// release, well before the one-minute lease ends.
				got := make(chan error, 1)
				go func() {
					lk, err := b.Lock(ctx, "x", padlock.WithWait(20*time.Second))
					if err == nil {
						err = lk.Unlock(ctx)
					}
					got <- err
				}()
				if srv.kind == "postgres" {
					// Release only once the waiter waits for a NOTIFY.
					padlocktest.WaitFor(t, "the waiter saying it waits", 30*time.Second, func() bool { return h.waitedFor(ctx, "x") })
				}
				if err := x.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				if err := <-got; err != nil {
					t.Fatalf("waiter through the other spelling: %v", err)
				}
			})
		}
	}
}

// TestOneTableOneMode uses one table in both modes: neither may grant a
// name the other holds, and the error says why.
func TestOneTableOneMode(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) {
			ctx := context.Background()
			lease := newHarness(t, srv, mysqlpg.ModeLease)
			defer lease.Close()
			adv := newHarness(t, srv, mysqlpg.ModeAdvisory)
			defer adv.Close()
			adv.table = lease.table
			ll, al := lease.open(t), adv.open(t)

			lk, err := ll.Lock(ctx, "mixed/lease")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := al.TryLock(ctx, "mixed/lease"); !errors.Is(err, padlock.ErrInvalidOption) {
				t.Errorf("advisory TryLock of a name a lease holds: %v, want ErrInvalidOption", err)
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			// The refused try let go of the advisory lock it had taken (on
			// MySQL one statement takes the lock and then finds the row
			// another mode's): another advisory client gets the name.
			free, err := adv.open(t).TryLock(ctx, "mixed/lease")
			if err != nil {
				t.Fatalf("advisory TryLock once the lease is gone: %v (the refused try kept its advisory lock?)", err)
			}
			if err := free.Unlock(ctx); err != nil {
				t.Fatal(err)
			}

			ak, err := al.Lock(ctx, "mixed/adv")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ll.TryLock(ctx, "mixed/adv"); !errors.Is(err, padlock.ErrNotAcquired) {
				t.Errorf("lease TryLock of a name advisory mode holds: %v, want ErrNotAcquired", err)
			}
			_, err = ll.Lock(ctx, "mixed/adv", padlock.WithWait(5*time.Second))
			if !errors.Is(err, padlock.ErrInvalidOption) || !strings.Contains(err.Error(), "one table serves one mode") {
				t.Errorf("lease Lock of a name advisory mode holds: %v, want ErrInvalidOption saying why", err)
			}
			if err := ak.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestQuotedTable uses a table name that needs quoting on both databases.
func TestQuotedTable(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) {
			h := newHarness(t, srv, mysqlpg.ModeLease)
			defer h.Close()
			h.table += "_we\"ird`name; DROP TABLE x"
			ctx := context.Background()
			l := h.open(t)
			lk, err := l.Lock(ctx, "quoted")
			if err != nil {
				t.Fatal(err)
			}
			if s, err := h.State(ctx); err != nil || len(s) != 1 || s[0] != "quoted" {
				t.Errorf("State in the quoted table = %q, %v", s, err)
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// tableDDL is Schema's CREATE TABLE for h's table, without the
// statements after it (the parent column's index): the table as a
// padlock before migration 5 made it, for tests that make older tables.
func tableDDL(t *testing.T, h *harness) string {
	t.Helper()
	ddl, err := mysqlpg.Schema(h.url(h.srv.addr, nil))
	if err != nil {
		t.Fatal(err)
	}
	table, rest, ok := strings.Cut(ddl, ";\n\n")
	if !ok || !strings.Contains(rest, "parent") {
		t.Fatalf("Schema = %q, want the table and then the parent column's index", ddl)
	}
	return table
}

// hasParentIndex reports whether h's table has an index that leads with
// its parent column (migration 5).
func (h *harness) hasParentIndex(ctx context.Context) (bool, error) {
	q := `SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
		WHERE i.indrelid = to_regclass($1) AND a.attname = 'parent')`
	if h.srv.kind == "mysql" {
		q = `SELECT COUNT(*) > 0 FROM information_schema.statistics
			WHERE table_schema = DATABASE() AND table_name = ? AND column_name = 'parent' AND seq_in_index = 1`
	}
	arg := h.quoted()
	if h.srv.kind == "mysql" {
		arg = h.table
	}
	var ok bool
	err := h.admin.QueryRowContext(ctx, q, arg).Scan(&ok)
	return ok, err
}

// A lock table made before migration 5 gets the index of its parent
// column when a Locker opens it (the advisory limit rule's check reads a
// name's readers and permits by it, instead of the whole table), and
// Migrate's second run finds it there. On PostgreSQL a Locker that may
// not add it first works without it: readers come and go, and a writer
// gets the name at once after each.
func TestParentIndexAdded(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) {
			h := newHarness(t, srv, mysqlpg.ModeLease)
			defer h.Close()
			ctx := context.Background()
			if _, err := h.admin.ExecContext(ctx, tableDDL(t, h)); err != nil {
				t.Fatalf("old table: %v", err)
			}
			if srv.kind == "postgres" {
				// The administrator's table: padlock's user may use it, not alter it.
				u, _ := url.Parse(srv.url)
				if _, err := h.admin.ExecContext(ctx, fmt.Sprintf("GRANT SELECT, INSERT, UPDATE ON %s TO %q", h.quoted(), u.User.Username())); err != nil {
					t.Fatal(err)
				}
				l := h.open(t)
				if ok, err := h.hasParentIndex(ctx); err != nil || ok {
					t.Fatalf("opened without the right to alter: index %v, %v; want none", ok, err)
				}
				readThenWrite(t, l, "unindexed")
				l.Close()
				// padlock's user may alter only its own table.
				if _, err := h.admin.ExecContext(ctx, fmt.Sprintf("ALTER TABLE %s OWNER TO %q", h.quoted(), u.User.Username())); err != nil {
					t.Fatal(err)
				}
			}
			if ok, err := h.hasParentIndex(ctx); err != nil || ok {
				t.Fatalf("before Open: index %v, %v; want none", ok, err)
			}
			l := h.open(t)
			defer l.Close()
			if ok, err := h.hasParentIndex(ctx); err != nil || !ok {
				t.Fatalf("after Open: index %v, %v; want it added", ok, err)
			}
			readThenWrite(t, l, "indexed")
			if err := mysqlpg.Migrate(ctx, h.url(srv.addr, nil)); err != nil {
				t.Fatalf("Migrate on a table with the index: %v", err)
			}
		})
	}
}

// readThenWrite takes name as a reader and then, after its release, as a
// writer without waiting, three times.
func readThenWrite(t *testing.T, l *padlock.Locker, name string) {
	t.Helper()
	ctx := context.Background()
	for range 3 {
		r, err := l.RLock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		w, err := l.TryLock(ctx, name)
		if err != nil {
			t.Fatalf("a writer after the reader's release: %v", err)
		}
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
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
			if ok, err := h.hasParentIndex(ctx); err != nil || !ok {
				t.Fatalf("after Migrate: parent index %v, %v", ok, err)
			}
			// A user with only SELECT, INSERT and UPDATE on the table.
			user := "padlock_rw_" + strings.TrimPrefix(h.table, "padlock_")
			grants := []string{
				`CREATE ROLE ` + user + ` LOGIN PASSWORD 'rw'`,
				`GRANT CONNECT ON DATABASE padlock TO ` + user,
				`GRANT USAGE ON SCHEMA public TO ` + user,
				`GRANT SELECT, INSERT, UPDATE ON ` + h.quoted() + ` TO ` + user,
				// WatchHolders' replication connection; the publication
				// it decodes is Migrate's (only the owner may make it).
				`ALTER ROLE ` + user + ` REPLICATION`,
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
				if srv.kind == "postgres" {
					wctx, cancel := context.WithTimeout(ctx, time.Minute)
					ch, err := l.WatchHolders(wctx, "migrated-")
					switch {
					case mode == mysqlpg.ModeAdvisory && !errors.Is(err, padlock.ErrUnsupported):
						t.Errorf("advisory: WatchHolders = %v, want ErrUnsupported", err)
					case mode == mysqlpg.ModeLease && err != nil:
						t.Errorf("lease: WatchHolders as a user without DDL rights, after Migrate: %v", err)
					case mode == mysqlpg.ModeLease:
						if _, ok := <-ch; !ok {
							t.Error("lease: WatchHolders closed before its first signal")
						}
					}
					cancel()
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
			ddl := tableDDL(t, h)
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
