package mysqlpg_test

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/mysqlpg"
	"github.com/padlock-go/padlock/padlocktest"
)

// LockAll in lease mode takes a set of free names in one request: one
// statement on PostgreSQL, one transaction of four statements on MySQL
// (begin, upsert, check, commit), counted on the server, against the
// five upserts of the per-name path. Each member's token is above the
// name's earlier holder's. With one name held elsewhere the request takes
// nothing: LockAll waits for that name holding only the names before it
// (byte order), and the names after it stay free on the server.
func TestLockAllOneRequest(t *testing.T) {
	names := []string{"e", "a", "d", "b", "c"}
	// Statements per round of LockAll and UnlockAll (five releases).
	want := map[string]float64{"postgres": 1 + 5, "mysql": 4 + 5}
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) {
			h := newHarness(t, srv, mysqlpg.ModeLease)
			defer h.Close()
			h.direct = true
			ctx := context.Background()
			tokens := map[string]uint64{}
			round := func(l *padlock.Locker) error {
				locks, err := l.LockAll(ctx, names, padlock.WithWait(30*time.Second))
				if err != nil {
					return err
				}
				for i, lk := range locks {
					if lk.Name() != names[i] || lk.Token() <= tokens[names[i]] {
						return fmt.Errorf("handle %d: %q token %d; want %q above %d", i, lk.Name(), lk.Token(), names[i], tokens[names[i]])
					}
					tokens[names[i]] = lk.Token()
				}
				return padlock.UnlockAll(ctx, locks)
			}
			// run counts the statements of a Locker that runs n rounds,
			// from its Open to its Close, as TestStatementsPerCycle does.
			run := func(n int) int64 {
				before := must[int64](t)(statements(ctx, h))
				l, err := h.NewLocker(ctx, padlock.WithTTL(time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				for range n {
					if err := round(l); err != nil {
						t.Fatal(err)
					}
				}
				app := h.apps[l]
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				waitNoSessions(t, h, app)
				return must[int64](t)(statements(ctx, h)) - before
			}
			const short, long = 20, 60
			a, b := run(short), run(long)
			per := float64(b-a) / (long - short)
			t.Logf("%.2f statements per LockAll of %d names and its UnlockAll", per, len(names))
			if w := want[srv.kind]; math.Abs(per-w) > 0.25 { // one statement more per round would be 1
				t.Errorf("%.2f statements per LockAll of %d free names and its UnlockAll, want %v", per, len(names), w)
			}

			// One name held elsewhere.
			h.direct = false
			// A minute's lease: anything the request left taken stays taken
			// for longer than the test waits.
			l, other := h.open(t, padlock.WithTTL(time.Minute)), h.open(t)
			held, err := other.Lock(ctx, "c")
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- round(l) }()
			// The per-name path holds a and b and waits for c; had the one
			// request left d or e taken, they would be listed too.
			padlocktest.WaitFor(t, "LockAll holding a and b, waiting for c", 30*time.Second, func() bool {
				return slices.Equal(must[[]string](t)(h.State(ctx)), []string{"a", "b", "c"})
			})
			if err := held.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := must[[]string](t)(h.State(ctx)); len(got) != 0 {
				t.Errorf("held after UnlockAll: %v", got)
			}
		})
	}
}

// must returns a function that returns v, failing t on err.
func must[T any](t testing.TB) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// PostgreSQL's one-request LockAll respects a name's queue as a single
// try does: a name whose row has expired, or was released, while a waiter
// heads its queue is not free. Here the waiter's queue connection is
// stopped (SIGSTOP on its server process) as it heads the queue, and the
// holder lets go: a LockAll of that name and another may not take it (it
// waits in the queue behind the waiter, until its WithWait ends). Before,
// its one statement took every free row, queue or not.
func TestLockAllRespectsTheQueue(t *testing.T) {
	srv := servers(t)[0]
	if srv.kind != "postgres" {
		t.Fatal("servers(t)[0] is not PostgreSQL")
	}
	h := newHarness(t, srv, mysqlpg.ModeLease)
	defer h.Close()
	ctx := context.Background()
	h.extra = url.Values{"request_timeout": {"60s"}}
	long := padlock.WithTTL(time.Minute)
	holder, waiter, all := h.open(t, long), h.open(t, long), h.open(t, long)
	const name = "queued/a"
	lk, err := holder.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	go func() {
		lk, err := waiter.Lock(wctx, name)
		if err == nil {
			err = lk.Unlock(ctx)
		}
		got <- err
	}()
	// Stopped only while idle, between its steps: each step is one
	// pipeline, one transaction on the server, and a process stopped in
	// the middle of one keeps the name row locked (its "I wait" updates
	// it), so that the holder's release below waited for it and timed
	// out (seen under load). Idle is checked again once it is stopped (a
	// stopped process reports nothing new).
	var resume func()
	padlocktest.WaitFor(t, "the waiter heading the name's queue, stopped while idle", time.Minute, func() bool {
		pid, r := stopOne(t, "the waiter heading the name's queue", func() []int64 {
			return h.pids(ctx, t, `SELECT l.pid FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid
				WHERE l.locktype = 'advisory' AND l.granted AND s.application_name = $1 AND s.state = 'idle'`, h.apps[waiter])
		})
		if len(h.pids(ctx, t, `SELECT pid FROM pg_stat_activity WHERE pid = $1 AND state = 'idle'`, pid)) == 1 {
			resume = r
			return true
		}
		r()
		return false
	})
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	locks, err := all.LockAll(ctx, []string{name, "queued/b"}, padlock.WithWait(2*time.Second))
	if err == nil {
		padlock.UnlockAll(ctx, locks)
		t.Fatal("LockAll took a name a waiter heads the queue of")
	}
	resume()
	if err := <-got; err != nil {
		t.Fatalf("the waiter, after its queue connection ran again: %v", err)
	}
}
