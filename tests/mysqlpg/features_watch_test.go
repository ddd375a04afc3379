package mysqlpg_test

import (
	"context"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/padlocktest"
)

// On PostgreSQL in lease mode, WatchHolders follows the lock table by a
// replication connection. When the server ends that connection, the watch
// connects again (a new temporary slot) and no change is lost: a grant
// made meanwhile still brings a signal after which Holders shows it.
func TestWatchHoldersReconnects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := startFeedWatch(t, ctx, "feed/")
	h, w, b, ch, first := f.h, f.w, f.b, f.ch, f.first
	var ended bool
	if err := h.stats.QueryRowContext(ctx, `SELECT pg_terminate_backend($1)`, first).Scan(&ended); err != nil || !ended {
		t.Fatalf("pg_terminate_backend: %v, %v", ended, err)
	}
	conformance.Drain(ch)
	lk, err := b.Lock(ctx, "feed/after")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(context.WithoutCancel(ctx))
	conformance.SeenHolders(ctx, t, ch, w, "feed/", "the grant made while the replication connection was down", time.Minute,
		func(hs []padlock.Holder) bool { return len(hs) == 1 && hs[0].Token == lk.Token() })
	padlocktest.WaitFor(t, "a new replication connection", time.Minute, func() bool {
		now := walsenders(t, ctx, h, h.apps[w])
		return len(now) == 1 && now[0] != first
	})
}

// A replication connection whose path goes silent (packets dropped, no
// reset) never fails by itself: the watch asks the server to answer every
// 10s and connects again when it heard nothing for 20s. The path is
// silent for 30s (the fault's length, past that bound); once it is back,
// the watch is on a new connection and a grant brings a signal. Without
// the bound the old connection would resume as if nothing happened.
func TestWatchHoldersSilentPath(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := startFeedWatch(t, ctx, "silent/")
	h, w, b, ch, first := f.h, f.w, f.b, f.ch, f.first
	restore, err := h.Blackhole(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Second) // the fault's length, not a wait for a condition
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	padlocktest.WaitFor(t, "a new replication connection after the silence", 2*time.Minute, func() bool {
		now := walsenders(t, ctx, h, h.apps[w])
		return len(now) >= 1 && !slices.Contains(now, first)
	})
	conformance.Drain(ch)
	lk, err := b.Lock(ctx, "silent/after")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(context.WithoutCancel(ctx))
	conformance.SeenHolders(ctx, t, ch, w, "silent/", "a grant after the silence", time.Minute,
		func(hs []padlock.Holder) bool { return len(hs) == 1 && hs[0].Token == lk.Token() })
}

// feedWatch is a watch of a prefix on PostgreSQL in lease mode: the
// harness, the watching Locker w and its channel, another Locker b, and
// w's one replication connection (its walsender's pid) once the watch is
// up.
type feedWatch struct {
	h     *harness
	w, b  *padlock.Locker
	ch    <-chan struct{}
	first int64
}

// startFeedWatch starts a feedWatch of prefix; the harness closes with t.
func startFeedWatch(t *testing.T, ctx context.Context, prefix string) feedWatch {
	t.Helper()
	srv := servers(t)[0]
	if srv.kind != "postgres" {
		t.Fatalf("servers(t)[0] is %s, want postgres", srv.kind)
	}
	h := newHarness(t, srv, "lease")
	t.Cleanup(func() { h.Close() })
	w, b := h.open(t), h.open(t)
	ch, err := w.WatchHolders(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	conformance.Signal(t, ch, "the watch is up", time.Minute)
	pids := walsenders(t, ctx, h, h.apps[w])
	if len(pids) != 1 {
		t.Fatalf("%d replication connections of the watching Locker, want 1", len(pids))
	}
	return feedWatch{h: h, w: w, b: b, ch: ch, first: pids[0]}
}

// walsenders are the pids of app's replication connections on the server.
func walsenders(t *testing.T, ctx context.Context, h *harness, app string) []int64 {
	t.Helper()
	return h.pids(ctx, t, `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND backend_type = 'walsender'`, app)
}

// pids runs q, which selects server process ids, on the statistics
// connection.
func (h *harness) pids(ctx context.Context, t *testing.T, q string, args ...any) []int64 {
	t.Helper()
	rows, err := h.stats.QueryContext(ctx, q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var pids []int64
	for rows.Next() {
		var pid int64
		if err := rows.Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return pids
}

// stopOne waits until find returns exactly one server process id, stops
// that process (SIGSTOP: a connection whose server side hangs, its
// socket open), and returns its pid and a resume that sends SIGCONT; the
// test's cleanup resumes it too if the test ends first.
func stopOne(t *testing.T, what string, find func() []int64) (pid int64, resume func()) {
	t.Helper()
	padlocktest.WaitFor(t, what, time.Minute, func() bool {
		if pids := find(); len(pids) == 1 {
			pid = pids[0]
			return true
		}
		return false
	})
	proc, err := os.FindProcess(int(pid))
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("stop server process %d (%s): %v", pid, what, err)
	}
	var once sync.Once
	resume = func() {
		once.Do(func() {
			if err := proc.Signal(syscall.SIGCONT); err != nil {
				t.Errorf("resume server process %d: %v", pid, err)
			}
		})
	}
	t.Cleanup(resume)
	return pid, resume
}
