package mysqlpg_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/mysqlpg"
	"github.com/padlock-go/padlock/padlocktest"
)

// Readers and permits in lease mode, where the conformance suite cannot
// look: the operator's view of several holds on one name, a plain TryLock
// on a semaphore, and a table made before their columns existed.

// Holders lists every reader and permit with its mode and limit, and a
// force release frees every one of them: each holder learns it at its
// next renewal, each release is recorded, and a writer gets the name.
func TestSharedHoldersAndForce(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) {
			h := newHarness(t, srv, mysqlpg.ModeLease)
			defer h.Close()
			ctx := context.Background()
			a, b := h.open(t), h.open(t)
			r1, err := a.RLock(ctx, "rw")
			if err != nil {
				t.Fatal(err)
			}
			r2, err := b.RLock(ctx, "rw")
			if err != nil {
				t.Fatal(err)
			}
			p, err := a.Lock(ctx, "sem", padlock.WithLimit(3))
			if err != nil {
				t.Fatal(err)
			}
			hs, err := a.Holders(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[string][]string{}
			for _, ho := range hs {
				kinds[ho.Name] = append(kinds[ho.Name], ho.Mode.String()+"/"+string(rune('0'+ho.Limit)))
			}
			if got := strings.Join(kinds["rw"], ","); got != "shared/1,shared/1" {
				t.Errorf("Holders of two readers: %q, want two shared holds", got)
			}
			if got := strings.Join(kinds["sem"], ","); got != "exclusive/3" {
				t.Errorf("Holders of a permit: %q, want exclusive with limit 3", got)
			}
			if _, err := b.ForceUnlock(ctx, "rw"); err != nil {
				t.Fatal(err)
			}
			for _, r := range []*padlock.Lock{r1, r2} {
				select {
				case <-r.Done():
				case <-time.After(3 * h.TTL()):
					t.Fatal("a force-released reader's Done did not close within three TTLs")
				}
				if !errors.Is(r.Err(), padlock.ErrLost) {
					t.Errorf("force-released reader: Err = %v, want ErrLost", r.Err())
				}
			}
			fr, err := b.ForcedReleases(ctx, "rw")
			if err != nil || len(fr) != 2 {
				t.Errorf("ForcedReleases after freeing two readers = %+v, %v: want both", fr, err)
			}
			w, err := b.TryLock(ctx, "rw")
			if err != nil {
				t.Fatalf("a writer after the readers were force-released: %v", err)
			}
			if w.Token() <= max(r1.Token(), r2.Token()) {
				t.Errorf("writer's token %d is not above the readers' %d and %d", w.Token(), r1.Token(), r2.Token())
			}
			for _, lk := range []*padlock.Lock{w, p} {
				if err := lk.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			conformanceState(t, h, nil)
		})
	}
}

// A plain TryLock (limit 1) on a name that a semaphore's permits hold is
// a limit mismatch at once, not ErrNotAcquired: the writer's refused
// upsert is checked against the group that holds the name. An RLock's
// reader group is limit 1, so a writer there is only refused.
func TestWriterMismatchOnPermits(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) {
			h := newHarness(t, srv, mysqlpg.ModeLease)
			defer h.Close()
			ctx := context.Background()
			a, b := h.open(t), h.open(t)
			p, err := a.Lock(ctx, "sem", padlock.WithLimit(2))
			if err != nil {
				t.Fatal(err)
			}
			_, err = b.TryLock(ctx, "sem")
			if !errors.Is(err, padlock.ErrInvalidOption) || !strings.Contains(err.Error(), "limit 2") || !strings.Contains(err.Error(), "limit 1") {
				t.Errorf("TryLock on a semaphore of 2 = %v, want ErrInvalidOption naming limits 2 and 1", err)
			}
			r, err := a.RLock(ctx, "rw")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.TryLock(ctx, "rw"); !errors.Is(err, padlock.ErrNotAcquired) {
				t.Errorf("TryLock beside a reader = %v, want ErrNotAcquired", err)
			}
			for _, lk := range []*padlock.Lock{p, r} {
				if err := lk.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			conformanceState(t, h, nil)
		})
	}
}

// A lock table made before the columns of readers and permits (migration
// 3) keeps working for the mutex; where padlock's user may not add them
// (an administrator's table on PostgreSQL) lease mode reports neither
// readers nor permits and RLock says ErrUnsupported, until padlock migrate
// has run; where it may (MariaDB), Open adds them.
func TestSharedColumnsAdded(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) {
			h := newHarness(t, srv, mysqlpg.ModeLease)
			defer h.Close()
			ctx := context.Background()
			ddl := tableDDL(t, h)
			var old []string
			for _, line := range strings.Split(ddl, "\n") {
				f := strings.Fields(line)
				if len(f) > 0 && (f[0] == "kind" || f[0] == "lim" || f[0] == "slots" || f[0] == "parent") {
					continue
				}
				if strings.HasPrefix(line, ")") { // the last column left loses its comma
					last := old[len(old)-1]
					code, comment, _ := strings.Cut(last, "--")
					old[len(old)-1] = strings.TrimSuffix(strings.TrimSpace(code), ",") + " -- " + comment
				}
				old = append(old, line)
			}
			stmt := strings.Join(old, "\n")
			if _, err := h.admin.ExecContext(ctx, stmt); err != nil {
				t.Fatalf("old table: %v\n%s", err, stmt)
			}
			u, _ := url.Parse(srv.url)
			if srv.kind == "postgres" {
				// The administrator's table, which padlock's user may use but not alter.
				if _, err := h.admin.ExecContext(ctx, fmt.Sprintf("GRANT SELECT, INSERT, UPDATE ON %s TO %q", h.quoted(), u.User.Username())); err != nil {
					t.Fatal(err)
				}
			}
			l := h.open(t)
			if srv.kind == "postgres" {
				if l.Capabilities().SharedLocks || l.Capabilities().Limits {
					t.Fatal("SharedLocks or Limits on a table padlock could not migrate")
				}
				if _, err := l.RLock(ctx, "old"); !errors.Is(err, padlock.ErrUnsupported) {
					t.Fatalf("RLock on a table without the columns = %v, want ErrUnsupported", err)
				}
				lk, err := l.Lock(ctx, "old")
				if err != nil {
					t.Fatalf("the mutex on a table without the columns: %v", err)
				}
				if err := lk.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				// Migrate, run by a user that may alter the table.
				if _, err := h.admin.ExecContext(ctx, fmt.Sprintf("ALTER TABLE %s OWNER TO %q", h.quoted(), u.User.Username())); err != nil {
					t.Fatal(err)
				}
				for range 2 {
					if err := mysqlpg.Migrate(ctx, h.url(h.srv.addr, nil)); err != nil {
						t.Fatal(err)
					}
				}
				l = h.open(t)
			}
			if !l.Capabilities().SharedLocks || !l.Capabilities().Limits {
				t.Fatal("no SharedLocks or Limits on a migrated table")
			}
			r, err := l.RLock(ctx, "old")
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The statements of a reader's or permit's grant and release on
// PostgreSQL look up the name's slot rows by key or by the parent column's
// index, whatever the table
// holds: on a table of many names, as PostgreSQL plans them (generic and
// custom plans), none reads the whole table. A join to the slot keys was
// once planned as a hash of the whole table, read at every grant while
// the name row was locked: invisible on the suite's small tables, it cost
// every reader a sequential scan of the operator's.
func TestReaderStatementsUseTheIndex(t *testing.T) {
	ctx := context.Background()
	h, conn := plannedTable(ctx, t, 20000)
	statements := []struct {
		file, types, args string
	}{
		{"shared_grant.sql", "bytea, bytea, text, integer, bigint, boolean, text, text, integer, text, text",
			`sha256('rw'::bytea), 'rw'::bytea, 'S', 1, 3000000, true, 'id', 'host', 1, NULL, 'rw'`},
		{"shared_free.sql", "bytea, text, text", `sha256('rw'::bytea), 'id', 'padlock'`},
		{"shared_join.sql", "bytea, bigint, text, text, integer, text, text, bytea",
			`sha256('rw'::bytea), 3000000, 'id', 'host', 1, NULL, 'rw', 'rw'::bytea`},
		{"shared_hold_unjoined.sql", "bytea, text", `sha256('rw'::bytea), 'id'`},
		{"shared_ensure_unjoined.sql", "bytea, text, text", `sha256('rw'::bytea), 'rw', 'id'`},
		{"shared_leave.sql", "bytea, text, text", `sha256('rw'::bytea), 'id', 'padlock'`},
		{"shared_last.sql", "bytea, bigint", `sha256('rw'::bytea), 3000000`},
		{"shared_vacate.sql", "bytea, text", `sha256('rw'::bytea), 'padlock'`},
	}
	for _, st := range statements {
		text := driverSQL(t, filepath.Join("..", "..", "mysqlpg", "sql", "postgres", st.file))
		stmt := strings.ReplaceAll(text, "{{table}}", h.table)
		for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
			if _, err := conn.ExecContext(ctx, "SET plan_cache_mode = "+mode); err != nil {
				t.Fatal(err)
			}
			plan, err := explain(ctx, conn, stmt, st.types, st.args)
			if err != nil {
				t.Fatalf("%s: %v", st.file, err)
			}
			if strings.Contains(plan, "Seq Scan on "+h.table) {
				t.Errorf("%s (%s) reads the whole table of %d names:\n%s", st.file, mode, 20000, plan)
			}
		}
	}
}

// listings are the statements that read every row of the table by
// design: they list every hold (Holders, padlock holders) or every forced
// release kept (ForcedReleases).
var listings = map[string]bool{
	"lease_holders.sql": true, "lease_holders_shared.sql": true, "advisory_holders.sql": true,
	"elect_holders.sql": true, "advisory_elect_holders.sql": true, "forced_list.sql": true,
}

// Every statement padlock runs on PostgreSQL but the listings finds its
// rows by key on a table of many names, as PostgreSQL plans it once per
// connection (generic plans): none reads the whole table. Each statement
// is the file the driver embeds, its placeholders filled as the driver
// fills them (a list is one array parameter; a CASE of slot arms has one
// arm), its parameters all NULL, which a generic plan does not look at.
func TestStatementsUseTheIndex(t *testing.T) {
	ctx := context.Background()
	h, conn := plannedTable(ctx, t, 20000)
	if _, err := conn.ExecContext(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "mysqlpg", "sql", "postgres", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the driver's statements: %v, %v", files, err)
	}
	placeholder := regexp.MustCompile(`\$(\d+)`)
	list := regexp.MustCompile(`\{\{in:[a-z]+\}\}`)
	checked := 0
	for _, f := range files {
		base := filepath.Base(f)
		stmt := strings.TrimSpace(driverSQL(t, f))
		if verb, _, _ := strings.Cut(strings.ToUpper(stmt), " "); !slices.Contains([]string{"SELECT", "WITH", "UPDATE", "INSERT", "DELETE"}, strings.TrimSpace(verb)) {
			continue // the schema and its migrations
		}
		stmt = strings.ReplaceAll(stmt, "{{table}}", h.table)
		stmt = strings.ReplaceAll(stmt, "{{case:slots}}", "WHEN pg_try_advisory_lock(($10::bigint[])[1]) THEN 1")
		n := 0
		for _, m := range placeholder.FindAllStringSubmatch(stmt, -1) {
			k, _ := strconv.Atoi(m[1])
			n = max(n, k)
		}
		stmt = list.ReplaceAllStringFunc(stmt, func(string) string { n++; return "$" + strconv.Itoa(n) })
		if strings.Contains(stmt, "{{") {
			t.Errorf("%s: a placeholder this test does not fill", base)
			continue
		}
		plan, err := explain(ctx, conn, stmt, "", strings.TrimSuffix(strings.Repeat("NULL, ", n), ", "))
		if err != nil {
			t.Errorf("%s: %v", base, err)
			continue
		}
		checked++
		if strings.Contains(plan, "Seq Scan on "+h.table) && !listings[base] {
			t.Errorf("%s reads the whole table of %d names:\n%s", base, 20000, plan)
		}
	}
	t.Logf("%d statements planned", checked)
}

// plannedTable returns a PostgreSQL lease-mode harness whose table a
// Locker made, filled with n expired rows of other names and analyzed (as
// an operator's table of many names looks to the planner), and an
// administrator's connection to plan statements on; both close when the
// test ends.
func plannedTable(ctx context.Context, t *testing.T, n int) (*harness, *sql.Conn) {
	t.Helper()
	srv := servers(t)[0]
	if srv.kind != "postgres" {
		t.Fatalf("servers()[0] is %s, want postgres", srv.kind)
	}
	h := newHarness(t, srv, mysqlpg.ModeLease)
	t.Cleanup(func() { h.Close() })
	r, err := h.open(t).RLock(ctx, "rw") // the table, made as a Locker makes it
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.admin.ExecContext(ctx, fmt.Sprintf(`INSERT INTO %s (lock_key, name, token, expires_at)
SELECT sha256(convert_to('filler' || i, 'UTF8')), 'filler' || i, 1, now() - interval '1 hour' FROM generate_series(1, %d) i`, h.table, n)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.admin.ExecContext(ctx, "ANALYZE "+h.table); err != nil {
		t.Fatal(err)
	}
	conn, err := h.admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return h, conn
}

// explain prepares stmt on conn, with its parameters' types (or, if
// types is empty, as PostgreSQL infers them), and returns the plan of its
// execution with args.
func explain(ctx context.Context, conn *sql.Conn, stmt, types, args string) (string, error) {
	prep := "PREPARE s AS "
	if types != "" {
		prep = "PREPARE s (" + types + ") AS "
	}
	if _, err := conn.ExecContext(ctx, prep+stmt); err != nil {
		return "", fmt.Errorf("prepare: %w", err)
	}
	defer conn.ExecContext(ctx, "DEALLOCATE s")
	q := "EXPLAIN EXECUTE s"
	if args != "" {
		q += " (" + args + ")"
	}
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		return "", fmt.Errorf("explain: %w", err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", err
		}
		plan = append(plan, line)
	}
	return strings.Join(plan, "\n"), rows.Err()
}

// A reader's or permit's grant and release on MySQL and MariaDB are
// scripts of statements over user variables; each statement that reads
// the table finds its rows by key on a table of 20,000 names (EXPLAIN: no
// full scan of it), as PostgreSQL's do (TestStatementsUseTheIndex), and
// none makes the server build a derived or temporary table: the name's
// slot rows come by the parent column's index, where a recursive sequence
// of their keys cost temporary tables at every grant and release.
func TestReaderScriptsUseTheIndex(t *testing.T) {
	srv := servers(t)[1]
	if srv.kind != "mysql" {
		t.Fatalf("servers()[1] is %s, want mysql", srv.kind)
	}
	ctx := context.Background()
	h := newHarness(t, srv, mysqlpg.ModeLease)
	defer h.Close()
	l := h.open(t)
	r1, err := l.RLock(ctx, "rw", padlock.WithTTL(time.Hour)) // the table and a name with two slots
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Unlock(ctx) // a live group: its row's plan is the one a reader's release reads
	r2, err := l.RLock(ctx, "rw")
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := h.admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{
		"SET SESSION max_recursive_iterations = 100000",
		fmt.Sprintf(`INSERT INTO %s (lock_key, name, token, expires_at)
WITH RECURSIVE s (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 20000)
SELECT UNHEX(SHA2(CONCAT('filler', i), 256)), CONCAT('filler', i), 1, '2000-01-01' FROM s`, h.table),
		"ANALYZE TABLE " + h.table,
		"SET @padlock_key = UNHEX(SHA2('rw', 256)), @padlock_name = 'rw', @padlock_slots = 2, @padlock_owner = 'id', @padlock_freed = 1, " +
			"@padlock_vacate = 1, @padlock_quarter = 500000", // a reader's leave, its group's row to settle
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for _, file := range []string{"shared_grant.sql", "shared_free.sql", "shared_leave.sql"} {
		explained := 0
		for _, st := range strings.Split(driverSQL(t, filepath.Join("..", "..", "mysqlpg", "sql", "mysql", file)), ";\n") {
			st = strings.TrimSpace(strings.ReplaceAll(st, "{{table}}", h.table))
			verb, _, _ := strings.Cut(st, " ")
			if !slices.Contains([]string{"SELECT", "UPDATE", "DELETE"}, strings.ToUpper(strings.TrimSpace(verb))) || !strings.Contains(st, h.table) {
				continue // SET, the transaction's bounds, the INSERTs (no read), the answer
			}
			rows, err := conn.QueryContext(ctx, "EXPLAIN "+st)
			if err != nil {
				t.Fatalf("%s: EXPLAIN %.60q: %v", file, st, err)
			}
			cols, err := rows.Columns()
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				vals := make([]sql.NullString, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				row := map[string]string{}
				for i, c := range cols {
					row[c] = vals[i].String
				}
				if (row["table"] == h.table || row["table"] == "l" || row["table"] == "n") && row["type"] == "ALL" {
					t.Errorf("%s reads the whole table of 20,000 names in %.80q: %v", file, st, row)
				}
				if strings.HasPrefix(row["table"], "<") || strings.Contains(row["Extra"], "temporary") {
					t.Errorf("%s builds a derived or temporary table in %.80q: %v", file, st, row)
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			rows.Close()
			explained++
		}
		if explained < 2 {
			t.Errorf("%s: %d statements explained, want its reads (at least 2)", file, explained)
		}
	}
}

// driverSQL returns the statements of one of the driver's embedded SQL
// files (path), without their comment lines.
func driverSQL(t *testing.T, path string) string {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, ln := range strings.Split(string(text), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(ln), "--") {
			lines = append(lines, ln)
		}
	}
	// A clause another file holds ({{include:name}}) goes in as the
	// driver puts it in.
	return sqlInclude.ReplaceAllStringFunc(strings.Join(lines, "\n"), func(inc string) string {
		return strings.TrimSpace(driverSQL(t, filepath.Join(filepath.Dir(path), sqlInclude.FindStringSubmatch(inc)[1]+".sql")))
	})
}

var sqlInclude = regexp.MustCompile(`\{\{include:([a-z_]+)\}\}`)

// On PostgreSQL in lease mode a reader joins a live group of readers
// without the name row's exclusive lock (shared_join.sql): it takes the
// next token of the group's reservation, one above the greatest on the
// name's slots, where a reader of the exclusive path takes the first of a
// new reservation. Readers leave side by side too (shared_leave.sql), and
// the last one out frees the name at once (shared_last.sql,
// shared_vacate.sql): a writer's TryLock right after is granted, above
// every reader's token, whichever of several readers left last.
func TestReadersJoinAndLeaveTogether(t *testing.T) {
	h := postgresLease(t)
	ctx := context.Background()
	// Leases of a minute: a join needs the group's lease to outlast its
	// own, which the group's first grant leaves true for a quarter of a
	// lease, far longer than a busy machine takes between two RLocks.
	long := padlock.WithTTL(time.Minute)
	lockers := []*padlock.Locker{h.open(t, long), h.open(t, long), h.open(t, long)}
	w := h.open(t)
	for round := range 5 {
		name := fmt.Sprintf("join-%d", round)
		first, err := lockers[0].RLock(ctx, name) // the exclusive path: it makes the group
		if err != nil {
			t.Fatal(err)
		}
		readers := []*padlock.Lock{first}
		for i, l := range lockers {
			r, err := l.RLock(ctx, name) // its Locker saw the group (or saw none: a try without waiting, then a join)
			if err != nil {
				t.Fatal(err)
			}
			readers = append(readers, r)
			if i == 0 && r.Token() != first.Token()+1 {
				t.Errorf("round %d: a reader beside the group's first (token %d) has token %d: it did not join (want %d)",
					round, first.Token(), r.Token(), first.Token()+1)
			}
		}
		if _, err := w.TryLock(ctx, name); !errors.Is(err, padlock.ErrNotAcquired) {
			t.Fatalf("round %d: TryLock beside %d readers: %v, want ErrNotAcquired", round, len(readers), err)
		}
		// Every reader leaves at once, from its own goroutine: whichever
		// commits last must free the group's row.
		var wg sync.WaitGroup
		errs := make(chan error, len(readers))
		for _, r := range readers {
			wg.Go(func() { errs <- r.Unlock(ctx) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		lk, err := w.TryLock(ctx, name)
		if err != nil {
			t.Fatalf("round %d: TryLock once every reader unlocked: %v (the group's row was not freed)", round, err)
		}
		for _, r := range readers {
			if lk.Token() <= r.Token() {
				t.Errorf("round %d: the writer's token %d is not above a reader's %d", round, lk.Token(), r.Token())
			}
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A reader joins a live group whatever its Locker saw before: its first
// round trip tries the join, and the exclusive grant only if the join did
// not grant (joinOrGrantBatch). A Locker that had not seen the group used
// to try the exclusive grant first, which, with the name row free of
// other transactions, made the group anew with a new reservation of
// tokens instead of joining it.
func TestFreshLockerJoinsALiveGroup(t *testing.T) {
	h := postgresLease(t)
	ctx := context.Background()
	// Leases of a minute: a join needs the group's lease to outlast its
	// own, which the group's first grant leaves true for a quarter of a
	// lease, far longer than a busy machine takes between two RLocks.
	long := padlock.WithTTL(time.Minute)
	for round := range 3 {
		name := fmt.Sprintf("fresh-%d", round)
		first, err := h.open(t, long).RLock(ctx, name) // the exclusive path: it makes the group
		if err != nil {
			t.Fatal(err)
		}
		r, err := h.open(t, long).RLock(ctx, name) // a Locker that never saw the name
		if err != nil {
			t.Fatal(err)
		}
		if r.Token() != first.Token()+1 {
			t.Errorf("round %d: a fresh Locker's reader beside the group's first (token %d) has token %d: it did not join (want %d)",
				round, first.Token(), r.Token(), first.Token()+1)
		}
		for _, lk := range []*padlock.Lock{r, first} {
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A reader whose join granted does not wait for anything after it in its
// round trip: a writer's uncommitted change to the name row (here an
// administrator's, standing for a writer stopped as it says that it
// waits) does not keep the join out (it holds the row FOR KEY SHARE), and
// the exclusive grant queued after the join makes the name row only if
// the join did not grant (shared_ensure_unjoined.sql). Its insert used to
// wait for the row's change up to the request's bound (here a minute),
// and the join's grant, committed, was reported as an error with nobody
// to release its slot (found in a review).
func TestJoinedReaderDoesNotWaitForTheRow(t *testing.T) {
	h := postgresLease(t)
	h.extra = url.Values{"request_timeout": {"60s"}}
	ctx := context.Background()
	const name = "joined-no-wait"
	first, err := h.open(t).RLock(ctx, name, padlock.WithTTL(10*time.Minute)) // makes the group, and keeps it live
	if err != nil {
		t.Fatal(err)
	}
	tx, err := h.admin.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE `+h.quoted()+` SET waiting_until = waiting_until WHERE lock_key = sha256($1::bytea)`,
		[]byte(name)); err != nil {
		t.Fatal(err)
	}
	// Half the request's bound: a reader that waited for the row's change
	// would wait for all of it.
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := h.open(t, padlock.WithTTL(time.Minute)).RLock(rctx, name)
	if err != nil {
		t.Fatalf("a reader joining beside an uncommitted change to the name row: %v", err)
	}
	if r.Token() != first.Token()+1 {
		t.Errorf("the reader has token %d, want %d: it did not join", r.Token(), first.Token()+1)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	for _, lk := range []*padlock.Lock{r, first} {
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	freeForAWriter(t, h.open(t), name) // nothing left behind
}

// Readers that join a live group at once each take a slot of their own
// (shared_join.sql: the first free slot row no other transaction has
// locked), so none of them is refused and sent down the exclusive path,
// which would raise the name's counter by a new reservation. The join
// used to choose among the free slots by a hash of its id, and two
// readers that chose the same one refused one of them.
func TestReadersJoiningAtOnceTakeSlotsOfTheirOwn(t *testing.T) {
	h := postgresLease(t)
	ctx := context.Background()
	const name, joiners = "at-once", 8
	// A join needs the group's lease to outlast its own: the group's
	// first reader, of a ten-minute lease, keeps it so for the joiners, of
	// a minute's (a reader that leaves cuts the group's lease back to its
	// live readers', this one's), however long a busy machine takes.
	long := padlock.WithTTL(time.Minute)
	first, err := h.open(t).RLock(ctx, name, padlock.WithTTL(10*time.Minute)) // makes the group, and keeps it live
	if err != nil {
		t.Fatal(err)
	}
	defer first.Unlock(ctx)
	lockers := make([]*padlock.Locker, joiners)
	var held []*padlock.Lock
	for i := range lockers {
		// One after another: the name gets a slot row for each reader
		// that will join at once.
		lockers[i] = h.open(t, long)
		r, err := lockers[i].RLock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, r)
	}
	for _, r := range held {
		if err := r.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Each slot write takes 50ms (a trigger), so that the joins below
	// overlap however the machine schedules them: a join that chose a slot
	// another has written and not yet committed must not wait for it and
	// be refused.
	slowSlotWrites(t, h)
	counter := func() int64 {
		t.Helper()
		var token int64
		if err := h.admin.QueryRowContext(ctx, `SELECT token FROM `+h.quoted()+` WHERE lock_key = sha256($1::bytea)`,
			[]byte(name)).Scan(&token); err != nil {
			t.Fatal(err)
		}
		return token
	}
	for round := range 3 {
		before := counter()
		start := make(chan struct{})
		readers := make([]*padlock.Lock, joiners)
		errs := make([]error, joiners)
		var wg sync.WaitGroup
		for i, l := range lockers {
			wg.Go(func() {
				<-start
				readers[i], errs[i] = l.RLock(ctx, name)
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: reader %d: %v", round, i, err)
			}
		}
		if after := counter(); after != before {
			t.Errorf("round %d: %d readers joining a live group at once raised the name's counter from %d to %d: one was refused a slot and took the exclusive path",
				round, joiners, before, after)
		}
		for i, r := range readers {
			if r.Token() <= first.Token() || int64(r.Token()) > before {
				t.Errorf("round %d: reader %d has token %d, want one in the group's reservation (%d, %d]", round, i, r.Token(), first.Token(), before)
			}
			if err := r.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A reader that leaves a group whose lease it made last past the other
// readers' (a longer TTL, or its renewals) cuts the group's lease back to
// theirs (shared_leave.sql on MySQL; shared_last.sql, shared_vacate.sql
// on PostgreSQL): the name row that writers wait on then ends with the
// readers still there, not a long lease after them, should they die
// without unlocking.
func TestLeavingReaderCutsTheGroupBack(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) {
			h := newHarness(t, srv, mysqlpg.ModeLease)
			defer h.Close()
			ctx := context.Background()
			long, short := h.open(t, padlock.WithTTL(time.Hour)), h.open(t)
			const name = "cut-back"
			rl, err := long.RLock(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			rs, err := short.RLock(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			left := func() time.Duration {
				q := `SELECT floor(extract(epoch FROM expires_at - now()) * 1000000)::bigint FROM ` + h.quoted() +
					` WHERE name = $1 AND parent IS NULL`
				if srv.kind == "mysql" {
					q = `SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) FROM ` + h.quoted() +
						` WHERE name = ? AND parent IS NULL`
				}
				var us int64
				if err := h.admin.QueryRowContext(ctx, q, name).Scan(&us); err != nil {
					t.Fatal(err)
				}
				return time.Duration(us) * time.Microsecond
			}
			if l := left(); l < 50*time.Minute {
				t.Fatalf("the group's lease with a reader of an hour's TTL: %v left, want about an hour", l)
			}
			if err := rl.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if l := left(); l > h.TTL() {
				t.Errorf("the group's lease after its hour-long reader left: %v left, want at most the other reader's TTL %v", l, h.TTL())
			}
			if err := rs.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			freeForAWriter(t, long, name)
		})
	}
}

// A reader leaves without the name row's lock while other readers stay
// (shared_leave.sql, on each server): a transaction that holds the row,
// here an administrator's standing for grants queued on it, does not
// hold the release up; on MySQL each release used to lock the row, one
// after another. The last reader out does lock it, and frees the name:
// readers that leave at once free it whichever of them commits last.
func TestReadersLeaveSideBySide(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) {
			h := newHarness(t, srv, mysqlpg.ModeLease)
			defer h.Close()
			h.extra = url.Values{"request_timeout": {"60s"}}
			ctx := context.Background()
			const name = "side-by-side"
			stay, err := h.open(t).RLock(ctx, name, padlock.WithTTL(10*time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			// The same lease as the reader that stays: a group's row that
			// outlasts its live readers by more than a quarter of the
			// leaving reader's lease is cut back, which locks the row.
			leaving, err := h.open(t).RLock(ctx, name, padlock.WithTTL(10*time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			tx, err := h.admin.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			lockRow := `SELECT 1 FROM ` + h.quoted() + ` WHERE lock_key = sha256($1::bytea) FOR UPDATE`
			if srv.kind == "mysql" {
				lockRow = `SELECT 1 FROM ` + h.quoted() + ` WHERE lock_key = UNHEX(SHA2(?, 256)) FOR UPDATE`
			}
			if _, err := tx.ExecContext(ctx, lockRow, []byte(name)); err != nil {
				t.Fatal(err)
			}
			// A release that waited for the row would still be waiting
			// (a request may wait a minute here) when Unlock gives up on
			// it, within this bound.
			uctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := leaving.Unlock(uctx); err != nil {
				t.Fatalf("a reader's Unlock beside another reader, the name row locked: %v", err)
			}
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			if err := stay.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			w := h.open(t)
			freeForAWriter(t, w, name)
			lockers := []*padlock.Locker{h.open(t), h.open(t), h.open(t), h.open(t)}
			for round := range 5 {
				readers := make([]*padlock.Lock, len(lockers))
				for i, l := range lockers {
					if readers[i], err = l.RLock(ctx, name); err != nil {
						t.Fatal(err)
					}
				}
				start := make(chan struct{})
				errs := make([]error, len(readers))
				var wg sync.WaitGroup
				for i, r := range readers {
					wg.Go(func() {
						<-start
						errs[i] = r.Unlock(ctx)
					})
				}
				close(start)
				wg.Wait()
				for i, err := range errs {
					if err != nil {
						t.Fatalf("round %d: reader %d: %v", round, i, err)
					}
				}
				freeForAWriter(t, w, name)
			}
		})
	}
}

// A group of readers whose last reader died instead of unlocking keeps
// writers out at most a quarter of a lease past that reader's lease
// (sql.md, "Readers join a live group" and, on MySQL, "Readers leave side
// by side"), on both databases: the group's row ends no later
// than TTL/4 after its latest slot, and no earlier, and a writer is
// granted once it has ended, never before. Checked on the rows, not on
// a clock: with the group made by one reader, and with a second reader
// that joined (or, on a slow machine, came in by the exclusive path)
// and stayed after the first unlocked.
func TestDeadGroupFreesWithinAQuarterLease(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) { deadGroupFreesWithinAQuarterLease(t, srv) })
	}
}

func deadGroupFreesWithinAQuarterLease(t *testing.T, srv server) {
	h := newHarness(t, srv, mysqlpg.ModeLease)
	defer h.Close()
	ctx := context.Background()
	w := h.open(t)
	us := func(q, name string) int64 {
		t.Helper()
		var v int64
		if err := h.admin.QueryRowContext(ctx, fmt.Sprintf(q, h.quoted()), name).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	groupEnds := `SELECT floor(extract(epoch FROM expires_at) * 1000000)::bigint FROM %s WHERE name = $1 AND parent IS NULL`
	slotEnds := `SELECT floor(extract(epoch FROM max(expires_at)) * 1000000)::bigint FROM %s WHERE name = $1 AND parent IS NOT NULL AND owner IS NOT NULL`
	granted := `SELECT floor(extract(epoch FROM acquired_at) * 1000000)::bigint FROM %s WHERE name = $1 AND parent IS NULL AND owner IS NOT NULL`
	if srv.kind == "mysql" { // microseconds since the epoch of the UTC DATETIMEs, whatever the session's time zone
		groupEnds = `SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01', expires_at) FROM %s WHERE name = ? AND parent IS NULL`
		slotEnds = `SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01', max(expires_at)) FROM %s WHERE name = ? AND parent IS NOT NULL AND owner IS NOT NULL`
		granted = `SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01', acquired_at) FROM %s WHERE name = ? AND parent IS NULL AND owner IS NOT NULL`
	}
	for _, readers := range []int{1, 2} {
		name := fmt.Sprintf("dead-group-%d", readers)
		var last *padlock.Locker
		var first *padlock.Lock
		for i := range readers {
			l := h.open(t)
			lk, err := l.RLock(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				first = lk
			}
			last = l
		}
		if readers > 1 {
			if err := first.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.Kill(ctx, last); err != nil {
			t.Fatal(err)
		}
		group, slot := us(groupEnds, name), us(slotEnds, name)
		quarter := (h.TTL() / 4).Microseconds()
		if group < slot || group > slot+quarter {
			t.Errorf("%d reader(s): the group's lease ends %v after its last reader's, want between 0 and a quarter of the %v lease",
				readers, time.Duration(group-slot)*time.Microsecond, h.TTL())
		}
		padlocktest.WaitFor(t, "a writer's TryLock after the group's last reader died", time.Minute, func() bool {
			lk, err := w.TryLock(ctx, name)
			if errors.Is(err, padlock.ErrNotAcquired) {
				return false
			}
			if err != nil {
				t.Fatal(err)
			}
			if at := us(granted, name); at < group {
				t.Errorf("%d reader(s): a writer was granted %v before the group's lease ended", readers, time.Duration(group-at)*time.Microsecond)
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			return true
		})
	}
}

// postgresLease is a harness on PostgreSQL in lease mode, closed when the
// test ends.
func postgresLease(t *testing.T) *harness {
	srv := servers(t)[0]
	if srv.kind != "postgres" {
		t.Fatal("servers(t)[0] is not PostgreSQL")
	}
	h := newHarness(t, srv, mysqlpg.ModeLease)
	t.Cleanup(func() { h.Close() })
	return h
}

// On MySQL and MariaDB a grant takes the lowest free slot, found by the
// index each slot row keeps (shared_grant.sql): a name has as many slot
// rows as it ever had holds at once, however often they come and go, and
// of the slots freed in the middle and at the end, the middle one is the
// next taken. Slot rows that an
// earlier padlock wrote, without an index, are left as they are and new
// ones are made beside them, once.
func TestSlotRowsReused(t *testing.T) {
	srv := servers(t)[1]
	ctx := context.Background()
	h := newHarness(t, srv, mysqlpg.ModeLease)
	defer h.Close()
	l := h.open(t)
	const name = "reused"
	rows := func() (n, indexed int) {
		t.Helper()
		err := h.admin.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(slots) FROM `+h.quoted()+
			` WHERE parent = UNHEX(SHA2(?, 256))`, name).Scan(&n, &indexed)
		if err != nil {
			t.Fatal(err)
		}
		return n, indexed
	}
	hold := func(k int) []*padlock.Lock {
		t.Helper()
		var out []*padlock.Lock
		for range k {
			r, err := l.RLock(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
		return out
	}
	unlock := func(rs ...*padlock.Lock) {
		t.Helper()
		for _, r := range rs {
			if err := r.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 5 {
		unlock(hold(3)...)
	}
	if n, _ := rows(); n != 3 {
		t.Fatalf("%d slot rows after five rounds of three readers at once, want 3", n)
	}
	slotOf := func(r *padlock.Lock) int64 {
		t.Helper()
		var slot sql.NullInt64
		if err := h.admin.QueryRowContext(ctx, `SELECT slots FROM `+h.quoted()+` WHERE parent = UNHEX(SHA2(?, 256)) AND owner IS NOT NULL`+
			` AND token = ?`, name, r.Token()).Scan(&slot); err != nil {
			t.Fatal(err)
		}
		if !slot.Valid {
			t.Fatalf("the slot row of the reader with token %d has no index", r.Token())
		}
		return slot.Int64
	}
	rs := hold(3)
	for i, r := range rs {
		if got := slotOf(r); got != int64(i) {
			t.Errorf("reader %d of three on free slots took slot %d, want the lowest free, %d", i, got, i)
		}
	}
	unlock(rs[1], rs[2])
	again := hold(1)[0]
	if n, _ := rows(); n != 3 {
		t.Errorf("%d slot rows after a reader took a slot others freed, want 3", n)
	}
	if got := slotOf(again); got != 1 {
		t.Errorf("the reader after the second and third of three left took slot %d, want the lowest freed, 1", got)
	}
	unlock(rs[0], again)

	// Rows as an earlier padlock left them: no index.
	if _, err := h.admin.ExecContext(ctx, `UPDATE `+h.quoted()+` SET slots = NULL WHERE parent = UNHEX(SHA2(?, 256))`, name); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		unlock(hold(3)...)
	}
	if n, indexed := rows(); n != 6 || indexed != 3 {
		t.Errorf("%d slot rows, %d with an index, after readers came back to rows without one; want 6 and 3", n, indexed)
	}
	freeForAWriter(t, l, name)
}

// A reader's grant that waits for its name's row longer than its
// request's bound leaves no reader that nobody holds. On PostgreSQL it
// gives up on the server too (lock_timeout, set a little under the
// bound): the whole transaction, COMMIT included, is on the server once
// sent, and without the bound it waited on after its client had given
// up, then granted and committed a reader that nobody holds, whose
// release in the background had run before it and found nothing to free.
// On MySQL the release in the background of a grant whose answer never
// came queues for the row behind it (shared_free.sql), where a reader's
// release otherwise does not lock the row (shared_leave.sql). Here the
// administrator holds the name's row past a reader's 2s bound while
// another reader keeps the group live: the TryRLock fails as
// unavailable, and once the row is free the kept reader is all there is.
func TestGrantGivesUpWithItsClient(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) {
			h := newHarness(t, srv, mysqlpg.ModeLease)
			defer h.Close()
			h.extra = url.Values{"request_timeout": {"2s"}}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			l := h.open(t, padlock.WithTTL(30*time.Second)) // an orphaned grant would outlive the test
			const name = "rw/stalled"
			// A reader keeps the name's group live, and its Locker has seen
			// it: the next reader joins first (PostgreSQL).
			kept, err := l.TryRLock(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			defer kept.Unlock(ctx)
			before, err := h.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rollback := h.lockRows(t, ctx, name)
			defer rollback()
			h.mu.Lock()
			app := h.apps[l]
			h.mu.Unlock()
			res := make(chan error, 1)
			go func() {
				lk, err := l.TryRLock(ctx, name)
				if err == nil {
					lk.Unlock(ctx)
				}
				res <- err
			}()
			padlocktest.WaitFor(t, "the reader's grant waiting for the row", time.Minute, func() bool {
				n, err := h.blockedOnRow(ctx, app, "INSERT INTO %")
				return err == nil && n >= 1
			})
			if err := <-res; !errors.Is(err, padlock.ErrUnavailable) {
				t.Fatalf("TryRLock on a row held past its bound: %v, want ErrUnavailable", err)
			}
			if srv.kind == "mysql" {
				// The grant still waits for the row on the server; the
				// release in the background must queue behind it, not
				// run now and find nothing.
				// (shared_free.sql's lock; a reader's leave locks the row
				// only to settle its group, by another statement.)
				padlocktest.WaitFor(t, "the release in the background queued for the row behind the grant", 15*time.Second, func() bool {
					n, err := h.blockedOnRow(ctx, app, "SELECT 1 INTO @padlock_locked FROM % WHERE lock_key = @padlock_key FOR UPDATE")
					return err == nil && n >= 1
				})
			}
			rollback()
			// Every transaction of the Locker's is over (a grant that
			// waited on has run and committed by then, its lease still
			// long).
			open := `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state <> 'idle'`
			if srv.kind == "mysql" {
				open = `SELECT count(*) FROM performance_schema.session_connect_attrs a
					JOIN information_schema.PROCESSLIST p ON p.ID = a.PROCESSLIST_ID
					WHERE a.ATTR_NAME = 'program_name' AND a.ATTR_VALUE = ? AND p.COMMAND IN ('Query', 'Execute')`
			}
			padlocktest.WaitFor(t, "no transaction of the Locker's still open", time.Minute, func() bool {
				var n int
				err := h.stats.QueryRowContext(ctx, open, app).Scan(&n)
				return err == nil && n == 0
			})
			// The release in the background may be retrying: well within
			// the orphan's 30s lease.
			padlocktest.WaitFor(t, "the kept reader all there is", 20*time.Second, func() bool {
				got, err := h.State(ctx)
				return err == nil && slices.Equal(got, before)
			})
		})
	}
}

// A writer that waits for a name which readers keep joining gets to say
// that it waits (the name row's waiting_until: its try, then its queue
// step's mark, queue_mark.sql), readers that ask after that stop joining
// (shared_join.sql refuses while a writer waits) and take the exclusive
// path, and the writer gets the name once the readers it waited for have
// left. A join held the name row FOR SHARE, which conflicts with the lock
// the writer's upsert and its mark take (FOR NO KEY UPDATE), and
// PostgreSQL lets a share lock that need not wait go ahead of a waiting
// exclusive one: joins that overlapped kept the row share-locked, so the
// writer could neither try nor say that it waits for as long as joins
// kept coming, and the check that stops joins for a waiting writer never
// saw one. A join now holds the row FOR KEY SHARE, which conflicts only
// with FOR UPDATE (the exclusive grant, the last reader's freeing, a
// downgrade, a forced release: what must see a join's slot). Here a
// trigger makes each slot row's write last 50ms, so that eight readers
// joining in turn overlap with no gap, as many readers do on a loaded
// server; a reader with an hour's lease keeps the group's lease long, so
// joins stay open (mixed TTLs: the group outlasts the joiners' leases).
// Readers on the exclusive path do not wait for the writer (the backend
// is not FIFO: FairFIFO is false), so it gets the name at a moment when
// none of them holds it, a few seconds in on this machine: its bound is
// generous.
func TestWaitingWriterSeenPastJoiningReaders(t *testing.T) {
	h := postgresLease(t)
	h.direct = true
	// A reader that finds no free slot waits for the row's FOR UPDATE
	// behind the joins until the writer stops them: a bound for a busy
	// machine, not the 5s default.
	h.extra = url.Values{"request_timeout": {"30s"}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const name = "rw/joined"
	anchor, err := h.open(t, padlock.WithTTL(time.Hour)).RLock(ctx, name) // makes the table and the group
	if err != nil {
		t.Fatal(err)
	}
	// Slots for the readers below: the name gets as many slot rows as it
	// had readers at once, and a join takes a free slot row made before
	// (it writes a new one only while the group has room for it).
	warm := h.open(t)
	var held []*padlock.Lock
	for range 24 {
		r, err := warm.RLock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, r)
	}
	for _, r := range held {
		if err := r.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	slowSlotWrites(t, h)

	// Twelve readers on six Lockers take and release the name over and
	// over, until the writer has it (or the test's bound).
	var (
		mu       sync.Mutex
		grants   int
		maxToken uint64
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	counted := func() int {
		mu.Lock()
		defer mu.Unlock()
		return grants
	}
	for range 6 {
		l := h.open(t, padlock.WithTTL(30*time.Second))
		for range 2 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					r, err := l.RLock(ctx, name)
					if err != nil {
						if ctx.Err() == nil {
							t.Errorf("a reader's RLock: %v", err)
						}
						return
					}
					mu.Lock()
					grants++
					maxToken = max(maxToken, r.Token())
					mu.Unlock()
					if err := r.Unlock(ctx); err != nil && ctx.Err() == nil {
						t.Errorf("a reader's Unlock: %v", err)
						return
					}
				}
			})
		}
	}
	defer wg.Wait()
	defer close(stop)
	padlocktest.WaitFor(t, "readers joining the group", time.Minute, func() bool { return counted() >= 16 })

	w := h.open(t)
	type result struct {
		lk  *padlock.Lock
		err error
	}
	res := make(chan result, 1)
	started := time.Now()
	go func() {
		lk, err := w.Lock(ctx, name)
		res <- result{lk, err}
	}()
	waiting := func() bool {
		var ok bool
		err := h.admin.QueryRowContext(ctx, `SELECT COALESCE(waiting_until > now(), false) FROM `+h.quoted()+
			` WHERE name = $1 AND parent IS NULL`, name).Scan(&ok)
		return err == nil && ok
	}
	padlocktest.WaitFor(t, "the waiting writer's signal while readers keep joining", 30*time.Second, waiting)
	signalled := counted()
	t.Logf("the writer said that it waits after %v", time.Since(started))
	padlocktest.WaitFor(t, "readers granted after the writer's signal", time.Minute, func() bool { return counted() > signalled })

	if err := anchor.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-res:
		if r.err != nil {
			t.Fatalf("the writer's Lock: %v", r.err)
		}
		t.Logf("the writer got the name %v after it asked, %d reader grants meanwhile", time.Since(started), counted()-signalled)
		mu.Lock()
		top := maxToken
		mu.Unlock()
		if r.lk.Token() <= top {
			t.Errorf("the writer's token %d is not above a reader's %d", r.lk.Token(), top)
		}
		if err := r.lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the writer still waits %v after it asked, with readers coming (%d reader grants since its signal)",
			time.Since(started), counted()-signalled)
	}
}

// slowSlotWrites makes every write of a live slot row on h's table take
// 50ms (a trigger), until the test ends, so that transactions that write
// slots overlap however the machine schedules them.
func slowSlotWrites(t *testing.T, h *harness) {
	t.Helper()
	ctx := context.Background()
	slow := h.table + "_slow"
	for _, q := range []string{
		`CREATE FUNCTION ` + slow + `() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			PERFORM pg_sleep(0.05);
			RETURN NEW;
		END $$`,
		`CREATE TRIGGER slow_slots BEFORE INSERT OR UPDATE ON ` + h.quoted() +
			` FOR EACH ROW WHEN (NEW.parent IS NOT NULL AND NEW.owner IS NOT NULL) EXECUTE FUNCTION ` + slow + `()`,
	} {
		if _, err := h.admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		for _, q := range []string{`DROP TRIGGER slow_slots ON ` + h.quoted(), `DROP FUNCTION ` + slow + `()`} {
			if _, err := h.admin.ExecContext(context.Background(), q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
}

// freeForAWriter checks that once every reader of name has unlocked, a
// writer on l takes it at once (TryLock): no slot or group is left
// holding it.
func freeForAWriter(t *testing.T, l *padlock.Locker, name string) {
	t.Helper()
	ctx := context.Background()
	lk, err := l.TryLock(ctx, name)
	if err != nil {
		t.Fatalf("TryLock once every reader unlocked: %v", err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
