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
	"github.com/padlock-go/padlock/mysqlpg"
	"github.com/padlock-go/padlock/padlocktest"
)

// TestReleaseWhileTriesFillPool fills a lease-mode Locker's pool with
// tries that cannot finish: the administrator holds the row of the name
// they try locked, so each blocks inside the server. A release of
// another name by the same Locker must still get a connection and
// succeed while they are blocked, and at most all but one of the pool's
// connections may be taken by tries: acquisitions leave releases one
// (mysqlpg's acquiring). Before, the release queued for a connection
// behind the tries of the waiters it would let in, and under load a
// fifth of the releases outlasted their bound (TestStress).
func TestReleaseWhileTriesFillPool(t *testing.T) {
	const tries = 2 * mysqlpg.DefaultPoolSize
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

			// The administrator locks the contended name's row, by its key
			// (InnoDB would lock every row a scan by name passed).
			tx, err := h.admin.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			rolledBack := false
			rollback := func() {
				if !rolledBack {
					rolledBack = true
					if err := tx.Rollback(); err != nil {
						t.Errorf("rollback: %v", err)
					}
				}
			}
			defer rollback()
			q := "SELECT token FROM " + h.quoted() + " WHERE lock_key = ? FOR UPDATE"
			if srv.kind == "postgres" {
				q = "SELECT token FROM " + h.quoted() + " WHERE lock_key = $1 FOR UPDATE"
			}
			key := sha256.Sum256([]byte("pool/contended")) // mysqlpg's row key
			var token int64
			if err := tx.QueryRowContext(ctx, q, key[:]).Scan(&token); err != nil {
				t.Fatalf("lock the contended name's row: %v", err)
			}

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
				n, err := h.blockedOnRow(ctx, app)
				if err != nil {
					t.Logf("count the blocked sessions: %v", err)
				}
				return n
			}
			padlocktest.WaitFor(t, "the Locker's tries blocked on the row", time.Minute, func() bool {
				return blocked() >= mysqlpg.DefaultPoolSize-1
			})

			if err := mine.Unlock(ctx); err != nil {
				t.Errorf("a release while tries filled the pool: %v", err)
			}
			if n := blocked(); n > mysqlpg.DefaultPoolSize-1 {
				t.Errorf("%d of the Locker's %d connections blocked in tries: releases need one", n, mysqlpg.DefaultPoolSize)
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
// every waiting upsert, the sessions running an upsert (a try's INSERT),
// which here can only be waiting.
func (h *harness) blockedOnRow(ctx context.Context, app string) (int, error) {
	q := `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`
	if h.srv.kind == "mysql" {
		q = `SELECT count(*) FROM performance_schema.session_connect_attrs a
			JOIN information_schema.PROCESSLIST p ON p.ID = a.PROCESSLIST_ID
			WHERE a.ATTR_NAME = 'program_name' AND a.ATTR_VALUE = ?
			AND p.COMMAND = 'Query' AND p.INFO LIKE 'INSERT INTO %'`
	}
	var n int
	if err := h.stats.QueryRowContext(ctx, q, app).Scan(&n); err != nil {
		return 0, fmt.Errorf("%s: %w", h.srv.kind, err)
	}
	return n, nil
}
