package mysqlpg_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/mysqlpg"
	"github.com/padlock-go/padlock/padlocktest"
)

// TestReleaseWhileTriesFillPool fills a lease-mode Locker's pool with
// tries that cannot finish: the administrator holds the row of the name
// they try locked, so each blocks inside the server. A release of
// another name by the same Locker must still get a connection and
// succeed while they are blocked, and at most all but one of the
// connections that are not the renewals' may be taken by tries:
// acquisitions leave releases one (mysqlpg's acquiring). Before, the release queued for a connection
// behind the tries of the waiters it would let in, and under load a
// fifth of the releases outlasted their bound (TestStress).
func TestReleaseWhileTriesFillPool(t *testing.T) {
	const tries = 2 * mysqlpg.DefaultPoolSize
	// In lease mode one of the pool's connections is the renewals' own:
	// the others serve acquisitions and releases.
	const general = mysqlpg.DefaultPoolSize - 1
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) {
			h := newHarness(t, srv, mysqlpg.ModeLease)
			defer h.Close()
			// The tries wait on the row until the administrator lets it
			// go: a try that met its bound would leave, on MySQL, a
			// server thread still waiting for the row (go-sql-driver
			// closes the connection and sends no KILL QUERY).
			h.extra = url.Values{"request_timeout": {"10m"}}
			ctx := context.Background()
			owner := h.open(t, padlock.WithTTL(time.Minute)) // holds the contended name
			l := h.open(t, padlock.WithTTL(time.Minute))     // tries it, and releases another
			contended, err := owner.Lock(ctx, "pool/contended")
			if err != nil {
				t.Fatal(err)
			}
			mine, err := l.Lock(ctx, "pool/mine")
			if err != nil {
				t.Fatal(err)
			}

			rollback := h.lockRows(t, ctx, "pool/contended")
			defer rollback()

			var wg sync.WaitGroup
			results := make(chan error, tries)
			for range tries {
				wg.Go(func() {
					lk, err := l.TryLock(ctx, "pool/contended")
					if err == nil {
						lk.Unlock(ctx)
						err = errors.New("granted a name another Locker holds")
					}
					results <- err
				})
			}
			h.mu.Lock()
			app := h.apps[l]
			h.mu.Unlock()
			blocked := func() int {
				n, err := h.blockedOnRow(ctx, app, "INSERT INTO %")
				if err != nil {
					t.Logf("count the blocked sessions: %v", err)
				}
				return n
			}
			padlocktest.WaitFor(t, "the Locker's tries blocked on the row", time.Minute, func() bool {
				return blocked() >= general-1
			})

			if err := mine.Unlock(ctx); err != nil {
				t.Errorf("a release while tries filled the pool: %v", err)
			}
			if n := blocked(); n > general-1 {
				t.Errorf("%d of the Locker's %d general connections blocked in tries: releases need one", n, general)
			}
			conformanceState(t, h, []string{"pool/contended"}) // mine is gone, while the tries still wait

			rollback()
			wg.Wait()
			close(results)
			for err := range results {
				if !errors.Is(err, padlock.ErrNotAcquired) {
					t.Errorf("a try of a held name: %v", err)
				}
			}
			if err := contended.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			conformanceState(t, h, nil)
		})
	}
}

// blockedOnRow counts app's sessions that wait for a row lock: on
// PostgreSQL by their wait event; on MySQL, whose INNODB_TRX did not list
// every waiting upsert, the sessions running a statement like mysql (a
// LIKE pattern: a try's upsert, a release), which here can only be
// waiting.
func (h *harness) blockedOnRow(ctx context.Context, app, mysql string) (int, error) {
	q, args := `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`, []any{app}
	if h.srv.kind == "mysql" {
		q = `SELECT count(*) FROM performance_schema.session_connect_attrs a
			JOIN information_schema.PROCESSLIST p ON p.ID = a.PROCESSLIST_ID
			WHERE a.ATTR_NAME = 'program_name' AND a.ATTR_VALUE = ?
			AND p.COMMAND IN ('Query', 'Execute') AND p.INFO LIKE ?`
		args = append(args, mysql)
	}
	var n int
	if err := h.stats.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("%s: %w", h.srv.kind, err)
	}
	return n, nil
}

// TestRenewalWhileReleasesFillPool fills a lease-mode Locker's pool with
// releases that cannot finish (the administrator holds their rows
// locked): a hold of another name must still be renewed, on the
// renewals' own connection, and outlive several of its TTLs. When
// renewals shared the pool, database/sql handed each freed connection to
// a random waiter, and under load a renewal could lose the draw for a
// whole lease (a rehearsal's TestStress lost three holds so).
func TestRenewalWhileReleasesFillPool(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) {
			h := newHarness(t, srv, mysqlpg.ModeLease)
			defer h.Close()
			h.extra = url.Values{"request_timeout": {"10m"}} // the releases wait on the rows, not their bound
			ctx := context.Background()
			l := h.open(t, padlock.WithTTL(2*time.Second))
			var blockedNames []*padlock.Lock
			var names []string
			for i := range mysqlpg.DefaultPoolSize {
				name := fmt.Sprintf("pool/release-%d", i)
				lk, err := l.Lock(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				blockedNames = append(blockedNames, lk)
				names = append(names, name)
			}
			kept, err := l.Lock(ctx, "pool/kept")
			if err != nil {
				t.Fatal(err)
			}

			rollback := h.lockRows(t, ctx, names...)
			defer rollback()
			var wg sync.WaitGroup
			for _, lk := range blockedNames {
				wg.Go(func() { lk.Unlock(ctx) }) // unavailable after its bound; finished in the background
			}
			h.mu.Lock()
			app := h.apps[l]
			h.mu.Unlock()
			padlocktest.WaitFor(t, "the Locker's releases blocked on their rows", time.Minute, func() bool {
				n, err := h.blockedOnRow(ctx, app, "UPDATE%SET owner = NULL%")
				return err == nil && n >= mysqlpg.DefaultPoolSize-1
			})

			// Three renewals of the kept hold while the releases wait: its
			// row's lease end moves on each time.
			expires := "SELECT CAST(UNIX_TIMESTAMP(expires_at) * 1000000 AS SIGNED) FROM " + h.quoted() + " WHERE lock_key = ?"
			if srv.kind == "postgres" {
				expires = "SELECT (extract(epoch FROM expires_at) * 1000000)::bigint FROM " + h.quoted() + " WHERE lock_key = $1"
			}
			key := sha256.Sum256([]byte("pool/kept"))
			var last int64 // µs
			renewals := 0
			padlocktest.WaitFor(t, "three renewals of the kept hold", time.Minute, func() bool {
				var at int64
				if err := h.admin.QueryRowContext(ctx, expires, key[:]).Scan(&at); err != nil {
					t.Logf("read the kept hold's lease: %v", err)
					return false
				}
				if last != 0 && at > last {
					renewals++
				}
				last = at
				return renewals >= 3
			})
			if err := kept.Err(); err != nil {
				t.Errorf("the kept hold while releases filled the pool: %v", err)
			}

			rollback()
			wg.Wait()
			if err := kept.Unlock(ctx); err != nil {
				t.Errorf("unlock the kept hold: %v", err)
			}
			conformance.WaitState(ctx, t, h, "every release done", time.Minute, func(s []string) bool { return len(s) == 0 })
		})
	}
}

// lockRows has the administrator lock the rows of names, by their keys
// (InnoDB would lock every row a scan by name passed), in a transaction
// that the returned function rolls back (once; later calls do nothing).
func (h *harness) lockRows(t *testing.T, ctx context.Context, names ...string) (rollback func()) {
	t.Helper()
	tx, err := h.admin.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	rollback = func() {
		once.Do(func() {
			if err := tx.Rollback(); err != nil {
				t.Errorf("rollback: %v", err)
			}
		})
	}
	q := "SELECT token FROM " + h.quoted() + " WHERE lock_key = ? FOR UPDATE"
	if h.srv.kind == "postgres" {
		q = "SELECT token FROM " + h.quoted() + " WHERE lock_key = $1 FOR UPDATE"
	}
	for _, name := range names {
		key := sha256.Sum256([]byte(name)) // mysqlpg's row key
		var token int64
		if err := tx.QueryRowContext(ctx, q, key[:]).Scan(&token); err != nil {
			rollback()
			t.Fatalf("lock the row of %q: %v", name, err)
		}
	}
	return rollback
}
