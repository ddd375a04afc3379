package mysqlpg_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/padlocktest"
)

// TestStatementsPerCycle counts, on the server, the statements of an
// uncontended Lock+Unlock: each is one round trip (pgx caches prepared
// statements per connection; the MySQL driver interpolates arguments).
// Lease mode takes one upsert and one release; advisory mode on
// PostgreSQL one try-and-count statement and one unlock, on MySQL
// GET_LOCK, the counter's upsert, and RELEASE_LOCK.
func TestStatementsPerCycle(t *testing.T) {
	want := map[string]float64{
		"postgres/lease": 2, "postgres/advisory": 2,
		"mysql/lease": 2, "mysql/advisory": 3,
	}
	const cycles = 200
	each(t, func(t *testing.T, h *harness) {
		h.direct = true
		ctx := context.Background()
		before, err := statements(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		l, err := h.NewLocker(ctx, padlock.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		for range cycles {
			lk, err := l.Lock(ctx, "cycle")
			if err != nil {
				t.Fatal(err)
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
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
		// Besides the cycles: Open's looks at the table (it exists; it
		// has the holder column), the advisory session's setup, and the
		// counting queries themselves: a few, never one more per cycle.
		per := float64(after-before) / cycles
		t.Logf("%d statements for %d cycles: %.2f per cycle", after-before, cycles, per)
		w := want[h.srv.kind+"/"+h.mode]
		if extra := float64(after-before) - w*cycles; extra < 0 || extra > 20 {
			t.Errorf("%.2f statements per uncontended cycle, want %v and at most 20 besides", per, w)
		}
	})
}

// statements reads the server's count of statements run: transactions
// committed in the database on PostgreSQL (every statement of padlock's
// is one), Questions on MySQL.
func statements(ctx context.Context, h *harness) (int64, error) {
	var n int64
	var err error
	if h.srv.kind == "postgres" {
		err = h.admin.QueryRowContext(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	} else {
		var name string
		err = h.admin.QueryRowContext(ctx, `SHOW GLOBAL STATUS LIKE 'Questions'`).Scan(&name, &n)
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
