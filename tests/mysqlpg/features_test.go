package mysqlpg_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/mysqlpg"
	"github.com/padlock-go/padlock/padlocktest"
)

// An Unlock whose context is already done (defer lk.Unlock(reqCtx) after
// the request was cancelled) must not drop the holding session, which
// would free every other lock on it.
func TestAdvisoryUnlockCancelledKeepsOthers(t *testing.T) {
	eachAdvisory(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		a, b := h.open(t), h.open(t)
		x, err := a.Lock(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		y, err := a.Lock(ctx, "y")
		if err != nil {
			t.Fatal(err)
		}
		done, cancel := context.WithCancel(ctx)
		cancel()
		y.Unlock(done)
		if _, err := b.TryLock(ctx, "x"); !errors.Is(err, padlock.ErrNotAcquired) {
			t.Fatalf("TryLock of x after another lock's cancelled Unlock: %v, want ErrNotAcquired", err)
		}
		select {
		case <-x.Done():
			t.Fatalf("x lost: %v", x.Err())
		default:
		}
		conformanceState(t, h, []string{"x"})
		if err := x.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// A PostgreSQL advisory try whose statement the server asks to run again
// (SQLSTATE 40001 or 40P01, raised in the row's upsert) is rolled back,
// but the session-level advisory lock it took is not: the retry must let
// it go first, or the session holds the name twice and the release frees
// it once, leaving it held until the session ends. A trigger on the
// table raises serialization_failure at the first write of the name's
// row; the Lock succeeds on its retry, and once it is unlocked another
// Locker takes the name and nothing of it is left on the server.
func TestPostgresAdvisoryRetryTakesLockOnce(t *testing.T) {
	srv := servers(t)[0]
	if srv.kind != "postgres" {
		t.Fatalf("servers(t)[0] is %s, want postgres", srv.kind)
	}
	h := newHarness(t, srv, mysqlpg.ModeAdvisory)
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := h.open(t), h.open(t)
	// The table is made by the first acquisition; the name's row too, so
	// that the retried statement runs the upsert's UPDATE.
	lk, err := a.Lock(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	fail := h.table + "_fail"
	for _, q := range []string{
		`CREATE SEQUENCE ` + fail,
		`CREATE FUNCTION ` + fail + `() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
		BEGIN
			IF nextval('` + fail + `') = 1 THEN
				RAISE EXCEPTION 'injected by the test' USING ERRCODE = 'serialization_failure';
			END IF;
			RETURN NEW;
		END $$`,
		`CREATE TRIGGER fail_once BEFORE INSERT OR UPDATE ON ` + h.quoted() + ` FOR EACH ROW EXECUTE FUNCTION ` + fail + `()`,
	} {
		if _, err := h.admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	defer func() {
		for _, q := range []string{`DROP TRIGGER fail_once ON ` + h.quoted(), `DROP FUNCTION ` + fail + `()`, `DROP SEQUENCE ` + fail} {
			if _, err := h.admin.ExecContext(context.Background(), q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	}()
	lk, err = a.Lock(ctx, "x")
	if err != nil {
		t.Fatalf("Lock after an injected serialization failure: %v", err)
	}
	var fired int64
	if err := h.admin.QueryRowContext(ctx, `SELECT last_value FROM `+fail).Scan(&fired); err != nil {
		t.Fatal(err)
	}
	if fired < 2 {
		t.Fatalf("the trigger ran %d times, want at least 2 (the failed statement and its retry)", fired)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	conformanceState(t, h, nil)
	other, err := b.TryLock(ctx, "x")
	if err != nil {
		t.Fatalf("TryLock by another Locker after the release: %v (the session kept the lock its failed statement took)", err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestStatementsPerCycle counts, on the server, the statements of an
// uncontended Lock+Unlock: each is one round trip (pgx caches prepared
// statements per connection; MySQL's are prepared once per connection,
// TestMySQLWriterStatementsPrepared).
// Lease mode takes one upsert and one release; advisory mode one
// try-and-count statement and one unlock (on MySQL GET_LOCK runs inside
// the counter's upsert, advisory_try_acquire.sql).
func TestStatementsPerCycle(t *testing.T) {
	want := map[string]float64{
		"postgres/lease": 2, "postgres/advisory": 2,
		"mysql/lease": 2, "mysql/advisory": 2,
	}
	each(t, func(t *testing.T, h *harness) {
		h.direct = true
		ctx := context.Background()
		// run counts the statements of a Locker that runs n cycles,
		// from its Open to its Close.
		run := func(n int) int64 {
			before, err := statements(ctx, h)
			if err != nil {
				t.Fatal(err)
			}
			l, err := h.NewLocker(ctx, padlock.WithTTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			for range n {
				conformance.Cycle(ctx, t, l, "cycle")
			}
			app := h.apps[l]
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			waitNoSessions(t, h, app) // PostgreSQL counts a backend's statements by the time it exits
			after, err := statements(ctx, h)
			if err != nil {
				t.Fatal(err)
			}
			return after - before
		}
		// Besides the cycles, each Locker sends a few statements of its
		// own (Open's looks at the table and its columns, the advisory
		// session's setup, the counting queries themselves): the same
		// for both runs, so their difference is the cycles' alone.
		//
		// The server's counters are the database's (PostgreSQL) or the
		// server's (MySQL): autovacuum's transactions on the lease table
		// and the statistics other sessions flush late count in them too.
		// Such noise only ever adds, so the fewest of a few runs of each
		// length is the Locker's own count; a Locker that sent one
		// statement more per cycle would send it in every run.
		const short, long, attempts = 100, 300, 3
		w := want[h.srv.kind+"/"+h.mode]
		var a, b int64 = math.MaxInt64, math.MaxInt64
		var per, fixed float64
		for i := range attempts {
			a, b = min(a, run(short)), min(b, run(long))
			per = float64(b-a) / (long - short)
			fixed = float64(a) - w*short
			t.Logf("run %d: fewest %d statements for %d cycles, %d for %d: %.2f per cycle, %.0f besides", i+1, a, short, b, long, per, fixed)
			// The two Lockers' own statements differ by a few (a session's
			// setup may take a statement more or less): at most 0.05 a
			// cycle, where one statement more per cycle would be 1.
			if math.Abs(per-w) <= 0.05 && fixed >= 0 && fixed <= 40 {
				return
			}
		}
		t.Errorf("%.2f statements per uncontended cycle and %.0f besides (the fewest of %d runs), want %v and at most 40 besides", per, fixed, attempts, w)
	})
}

// On MySQL a writer's acquire and release run as server-side prepared
// statements (mysqlpg/prepared.go), executed in the binary protocol, in
// both modes: each uncontended cycle executes two, counted by the server
// (Com_stmt_execute). Other sessions' executions only add, so the fewest
// of a few runs is the Locker's own. The round trips per cycle stay two
// (TestStatementsPerCycle). The statements go with the Locker: once it is
// closed, the server holds none of them (Prepared_stmt_count back where it
// was).
func TestMySQLWriterStatementsPrepared(t *testing.T) {
	for _, srv := range servers(t) {
		if srv.kind != "mysql" {
			continue // PostgreSQL's statements are prepared by pgx's cache
		}
		for _, mode := range []string{mysqlpg.ModeLease, mysqlpg.ModeAdvisory} {
			t.Run(mode, func(t *testing.T) {
				h := newHarness(t, srv, mode)
				defer h.Close()
				ctx := context.Background()
				status := func(name string) int64 {
					var n int64
					if err := h.stats.QueryRowContext(ctx, `SHOW GLOBAL STATUS LIKE '`+name+`'`).Scan(&name, &n); err != nil {
						t.Fatal(err)
					}
					return n
				}
				held := status("Prepared_stmt_count")
				l := h.open(t, padlock.WithTTL(time.Minute)) // closed below, and at the end if a check fails first
				conformance.Cycle(ctx, t, l, "prepared")     // the statements are prepared on first use
				if n := status("Prepared_stmt_count"); n < held+2 {
					t.Errorf("%d statements prepared on the server after a cycle, want at least %d", n, held+2)
				}
				const cycles = 50
				fewest := int64(math.MaxInt64)
				for range 3 {
					before := status("Com_stmt_execute")
					for range cycles {
						conformance.Cycle(ctx, t, l, "prepared")
					}
					fewest = min(fewest, status("Com_stmt_execute")-before)
					if fewest == 2*cycles {
						break
					}
				}
				if fewest != 2*cycles {
					t.Errorf("%d prepared statements executed in %d uncontended cycles (the fewest of 3 runs), want %d", fewest, cycles, 2*cycles)
				}
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				padlocktest.WaitFor(t, "the Locker's prepared statements gone from the server", 15*time.Second, func() bool {
					return status("Prepared_stmt_count") <= held
				})
			})
		}
	}
}

// statements reads the server's count of statements run: transactions
// committed in the database on PostgreSQL (every statement of padlock's
// is one), Questions on MySQL.
func statements(ctx context.Context, h *harness) (int64, error) {
	var n int64
	var err error
	if h.srv.kind == "postgres" {
		// The Lockers' database, read from another (h.stats).
		err = h.stats.QueryRowContext(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = 'padlock'`).Scan(&n)
	} else {
		var name string
		err = h.stats.QueryRowContext(ctx, `SHOW GLOBAL STATUS LIKE 'Questions'`).Scan(&name, &n)
	}
	return n, err
}

// waitNoSessions waits until app has no session on the server.
func waitNoSessions(t *testing.T, h *harness, app string) {
	t.Helper()
	padlocktest.WaitFor(t, "no session of "+app+" left on the server", 15*time.Second, func() bool {
		ids, err := h.sessions(context.Background(), app)
		if err != nil {
			t.Fatal(err)
		}
		return len(ids) == 0
	})
}

// TestWakeOnRelease hands one name around eight Lockers many times with a
// one-minute lease: every waiter must be woken by the release (a
// NOTIFY on PostgreSQL, the poll on MySQL), never by the lease running
// out, so each Lock is bounded by far less than the lease.
func TestWakeOnRelease(t *testing.T) {
	const lockers, rounds = 8, 15
	each(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		errs := make(chan error, lockers)
		for range lockers {
			l := h.open(t, padlock.WithTTL(time.Minute))
			go func() {
				for range rounds {
					lk, err := l.Lock(ctx, "wake", padlock.WithWait(20*time.Second))
					if err != nil {
						errs <- fmt.Errorf("a waiter was not woken by the release within 20s of a 1m lease: %w", err)
						return
					}
					if err := lk.Unlock(ctx); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range lockers {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	})
}

// TestNothingLeftAfterClose checks the server after a Locker that held,
// waited (which starts PostgreSQL's listener) and was closed: no lock,
// no row held, no session of the Locker's.
func TestNothingLeftAfterClose(t *testing.T) {
	each(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		a, err := h.NewLocker(ctx, padlock.WithTTL(h.TTL()))
		if err != nil {
			t.Fatal(err)
		}
		b := h.open(t)
		app := h.apps[a]
		var held []*padlock.Lock
		for i := range 20 {
			lk, err := a.Lock(ctx, fmt.Sprintf("left/%d", i))
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, lk)
		}
		// b holds one name that a waits for: a's wait uses the listener.
		bl, err := b.Lock(ctx, "left/b")
		if err != nil {
			t.Fatal(err)
		}
		waited := make(chan error, 1)
		go func() {
			lk, err := a.Lock(ctx, "left/b", padlock.WithWait(30*time.Second))
			if err == nil {
				err = lk.Unlock(ctx)
			}
			waited <- err
		}()
		if h.srv.kind == "postgres" {
			// The waiter has started the Locker's listener.
			padlocktest.WaitFor(t, "a listening connection after a wait", 30*time.Second, func() bool { return h.listening(ctx, app) })
		}
		if err := bl.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-waited; err != nil {
			t.Fatal(err)
		}
		// On PostgreSQL in lease mode, a WatchHolders left running: its
		// replication connection and temporary slot must end with Close.
		watching := h.srv.kind == "postgres" && h.mode == "lease"
		if watching {
			if _, err := a.WatchHolders(ctx, "left/"); err != nil {
				t.Fatalf("WatchHolders: %v", err)
			}
			if n := h.watchSlots(ctx, t); n == 0 {
				t.Fatal("WatchHolders made no replication slot: the check below would prove nothing")
			}
		}
		if ids, _ := h.sessions(ctx, app); len(ids) == 0 {
			t.Fatal("the Locker has no sessions on the server: the check below would prove nothing")
		}
		for _, lk := range held[:10] {
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// Ten holds are left for Close to release.
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		conformance.WaitState(ctx, t, h, "no lock held after Close", 10*time.Second, func(s []string) bool { return len(s) == 0 })
		waitNoSessions(t, h, app)
		if watching {
			padlocktest.WaitFor(t, "no replication slot of WatchHolders after Close", 30*time.Second, func() bool { return h.watchSlots(ctx, t) == 0 })
		}
	})
}

// watchSlots counts WatchHolders' replication slots on the PostgreSQL
// server (every test's: run where no other test watches).
func (h *harness) watchSlots(ctx context.Context, t *testing.T) int {
	t.Helper()
	var n int
	if err := h.stats.QueryRowContext(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'padlock\_watch\_%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStress has 64 Lockers × 16 goroutines take 1,000 names at random:
// no two holders of a name at once, tokens rising per name, every
// acquisition served (no pool starvation), each Locker within its
// connection budget, and no session left after Close.
func TestStress(t *testing.T) {
	const lockers, workers, names, rounds = 64, 16, 1000, 6
	each(t, func(t *testing.T, h *harness) {
		h.direct = true
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		// This is a test of exclusion and of connection use, not of speed:
		// a thousand goroutines under the race detector on two cores can
		// take seconds for a round trip (and a SCRAM login, whose key
		// stretching the race detector slows down), so the lease, the
		// request bound and the dial bound are generous.
		h.extra = url.Values{"request_timeout": {"120s"}, "dial_timeout": {"120s"}}
		ls := make([]*padlock.Locker, lockers)
		for i := range ls {
			l, err := h.NewLocker(ctx, padlock.WithTTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			ls[i] = l
			t.Cleanup(func() { l.Close() })
		}
		var (
			slowest     atomic.Int64 // the longest Lock, in ns
			lateUnlocks atomic.Int64 // Unlocks finished in the background
			inside      [names]atomic.Int32
			mu          sync.Mutex
			tokens      [names]uint64
			done        atomic.Int64
			wg          sync.WaitGroup
			stuck       sync.Once // the server's state at the first failed Lock
		)
		for _, l := range ls {
			for range workers {
				wg.Go(func() {
					for range rounds {
						n := rand.IntN(names)
						t0 := time.Now()
						lk, err := l.Lock(ctx, fmt.Sprintf("stress/%d", n), padlock.WithWait(2*time.Minute))
						if took := int64(time.Since(t0)); took > slowest.Load() {
							slowest.Store(took) // a racy max is fine for a log line
						}
						if err != nil {
							t.Errorf("Lock: %v", err)
							stuck.Do(func() { h.logWaits(t, fmt.Sprintf("stress/%d", n)) })
							return
						}
						if inside[n].Add(1) != 1 {
							t.Errorf("two holders of stress/%d at once", n)
						}
						mu.Lock()
						if lk.Token() <= tokens[n] {
							t.Errorf("stress/%d: token %d after %d", n, lk.Token(), tokens[n])
						}
						tokens[n] = lk.Token()
						mu.Unlock()
						time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond) // the work under the lock
						inside[n].Add(-1)
						done.Add(1)
						switch err := lk.Unlock(ctx); {
						case errors.Is(err, padlock.ErrUnavailable):
							// Unlock waits at most DefaultRequestTimeout, then
							// releases in the background; on a machine this busy
							// that happens. The check for state left after
							// Close proves the release went through.
							lateUnlocks.Add(1)
						case err != nil:
							t.Errorf("Unlock: %v", err)
							return
						}
					}
				})
			}
		}
		wg.Wait()
		if got, want := done.Load(), int64(lockers*workers*rounds); got != want {
			t.Fatalf("%d of %d acquisitions done", got, want)
		}
		t.Logf("%d acquisitions; the slowest Lock took %v; %d Unlocks finished in the background",
			done.Load(), time.Duration(slowest.Load()), lateUnlocks.Load())
		for l, app := range h.apps {
			ids, err := h.sessions(ctx, app)
			if err != nil {
				t.Fatal(err)
			}
			// Its pool, PostgreSQL's listener, and at most two connections
			// waiting in writers' queues (docs/sql.md).
			const listener, queues = 1, 2
			if len(ids) > mysqlpg.DefaultPoolSize+listener+queues {
				t.Errorf("a Locker has %d connections, more than its pool of %d, one listener and %d in queues",
					len(ids), mysqlpg.DefaultPoolSize, queues)
			}
			if err := l.Close(); err != nil {
				t.Error(err)
			}
		}
		for _, app := range h.apps {
			waitNoSessions(t, h, app)
		}
		conformance.WaitState(ctx, t, h, "no lock held after Close", 10*time.Second, func(s []string) bool { return len(s) == 0 })
	})
}

// logWaits logs what the server says about name, for a Lock that waited
// too long: its row, and on PostgreSQL every advisory lock held or
// awaited (the names', the queues') with its session's state; on MySQL
// the user-level locks and the sessions' states.
func (h *harness) logWaits(t *testing.T, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	row := `SELECT token, owner, expires_at FROM ` + h.quoted() + ` WHERE name = '` + name + `'`
	var queries []string
	if h.srv.kind == "postgres" {
		row = `SELECT token, owner, expires_at, waiting_until FROM ` + h.quoted() + ` WHERE name = '` + name + `'`
		queries = append(queries, row, `SELECT l.pid, l.classid, l.objid, l.mode, l.granted, a.application_name, a.state, a.wait_event_type, a.wait_event,
			now() - a.state_change, left(a.query, 100)
			FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'advisory' ORDER BY l.classid, l.objid, l.granted DESC LIMIT 60`)
	} else {
		queries = append(queries, row, `SELECT * FROM performance_schema.metadata_locks WHERE OBJECT_TYPE = 'USER LEVEL LOCK' LIMIT 60`,
			`SELECT ID, STATE, TIME, LEFT(INFO, 100) FROM information_schema.PROCESSLIST WHERE COMMAND <> 'Sleep' LIMIT 60`)
	}
	for _, q := range queries {
		rows, err := h.admin.QueryContext(ctx, q)
		if err != nil {
			t.Logf("%s: %v", q, err)
			continue
		}
		cols, _ := rows.Columns()
		t.Logf("%s: %v", name, cols)
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Log(err)
				break
			}
			for i, v := range vals {
				if b, ok := v.([]byte); ok {
					vals[i] = string(b)
				}
			}
			t.Logf("  %v", vals)
		}
		rows.Close()
	}
}

// MySQL's advisory upsert (advisory_upsert.sql, here as
// advisory_acquire.sql sends it) takes the name's row only when it is this
// advisory key's or its lease has expired, and otherwise changes nothing,
// even when the row names the acquisition that asks: an acquisition tries
// again with the same id, and a row written by a try whose answer was lost
// may since have gone to readers (adv_key their marker), to another key,
// or, once expired, to a lease-mode holder. Each state is put in the row
// by hand, then the statement runs as that acquisition.
func TestMySQLAdvisoryUpsertLeavesOthersRows(t *testing.T) {
	for _, srv := range servers(t) {
		if srv.kind != "mysql" {
			continue // PostgreSQL's statement is another (advisory_acquire.sql there)
		}
		h := newHarness(t, srv, mysqlpg.ModeAdvisory)
		defer h.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conformance.Cycle(ctx, t, h.open(t), "n") // makes the table and the name's row
		conn, err := h.admin.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var key []byte
		var advKey string
		if err := conn.QueryRowContext(ctx, "SELECT lock_key, adv_key FROM "+h.quoted()+" WHERE name = 'n'").Scan(&key, &advKey); err != nil {
			t.Fatal(err)
		}
		upsert := strings.ReplaceAll(driverSQL(t, filepath.Join("..", "..", "mysqlpg", "sql", "mysql", "advisory_acquire.sql")), "{{table}}", h.quoted())
		const me = "0123456789abcdef0123456789abcdef" // the asking acquisition's id
		for _, c := range []struct {
			state, set string
			taken      bool
		}{
			{"readers' state", "owner = '" + me + "', adv_key = 'padlock:readers-marker', expires_at = '9999-12-31'", false},
			{"readers' state, naming an earlier writer,", "owner = 'an-earlier-acquisition', adv_key = 'padlock:readers-marker', expires_at = '9999-12-31'", false},
			{"another advisory key's", "owner = '" + me + "', adv_key = 'padlock:another-key', expires_at = '9999-12-31'", false},
			{"a live lease-mode holder's", "owner = '" + me + "', adv_key = NULL, expires_at = UTC_TIMESTAMP(6) + INTERVAL 1 MINUTE", false},
			{"this key's, free", "owner = 'an-earlier-acquisition', adv_key = '" + advKey + "', expires_at = '9999-12-31'", true},
			{"this key's, naming the acquisition (a lost answer's)", "owner = '" + me + "', adv_key = '" + advKey + "', expires_at = '9999-12-31'", true},
			{"an expired lease-mode holder's", "owner = 'a-lease-holder', adv_key = NULL, expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND", true},
		} {
			if _, err := conn.ExecContext(ctx, "UPDATE "+h.quoted()+" SET "+c.set+", host = 'before' WHERE lock_key = ?", key); err != nil {
				t.Fatal(err)
			}
			row := func() (token int64, owner, adv, host string) {
				var a sql.NullString
				if err := conn.QueryRowContext(ctx, "SELECT token, owner, adv_key, host FROM "+h.quoted()+" WHERE lock_key = ?", key).Scan(&token, &owner, &a, &host); err != nil {
					t.Fatal(err)
				}
				return token, owner, a.String, host
			}
			token, owner, adv, _ := row()
			res, err := conn.ExecContext(ctx, upsert, key, "n", me, "after", 1, advKey, nil)
			if err != nil {
				t.Fatal(err)
			}
			n, _ := res.RowsAffected()
			id, _ := res.LastInsertId()
			gotToken, gotOwner, gotAdv, gotHost := row()
			switch {
			case c.taken && (n != 2 || id != token+1 || gotToken != token+1 || gotOwner != me || gotAdv != advKey || gotHost != "after"):
				t.Errorf("%s row: %d rows affected, insert id %d, row token %d owner %q adv_key %q host %q; want it taken: 2, token %d, %q, %q, %q",
					c.state, n, id, gotToken, gotOwner, gotAdv, gotHost, token+1, me, advKey, "after")
			case !c.taken && (n != 0 || gotToken != token || gotOwner != owner || gotAdv != adv || gotHost != "before"):
				t.Errorf("%s row: %d rows affected, row token %d owner %q adv_key %q host %q; want it left alone: 0, token %d, %q, %q, %q",
					c.state, n, gotToken, gotOwner, gotAdv, gotHost, token, owner, adv, "before")
			}
		}
	}
}

// padlock's MySQL upserts read the columns they assigned before (MySQL
// assigns from left to right), which MariaDB's sql_mode
// SIMULTANEOUS_ASSIGNMENT would change: every assignment would read the
// row as it was, and a grant would leave the token where it was. So
// padlock takes that mode off on its own connections. With it on for the
// whole server, both modes' tokens still rise by one per uncontended
// cycle.
func TestMySQLSimultaneousAssignmentOff(t *testing.T) {
	for _, srv := range servers(t) {
		if srv.kind != "mysql" {
			continue // a MariaDB sql_mode
		}
		admin, err := srv.adminDB()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { admin.Close() }) // after the mode is put back
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var mode string
		if err := admin.QueryRowContext(ctx, "SELECT @@GLOBAL.sql_mode").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.ExecContext(ctx, "SET GLOBAL sql_mode = CONCAT(@@GLOBAL.sql_mode, ',SIMULTANEOUS_ASSIGNMENT')"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := admin.ExecContext(context.Background(), "SET GLOBAL sql_mode = ?", mode); err != nil {
				t.Error(err)
			}
		})
		for _, m := range []string{mysqlpg.ModeLease, mysqlpg.ModeAdvisory} {
			t.Run(m, func(t *testing.T) {
				h := newHarness(t, srv, m)
				defer h.Close()
				l := h.open(t)
				var last uint64
				for i := range 5 {
					lk, err := l.Lock(ctx, "n")
					if err != nil {
						t.Fatal(err)
					}
					if tok := lk.Token(); i > 0 && tok != last+1 {
						t.Errorf("cycle %d: token %d after %d, want %d", i+1, tok, last, last+1)
					}
					last = lk.Token()
					if err := lk.Unlock(ctx); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
}
