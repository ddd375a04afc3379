package mysqlpg_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
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

// each runs f for both modes on both databases, each in its own harness.
func each(t *testing.T, f func(t *testing.T, h *harness)) {
	for _, srv := range servers(t) {
		for _, mode := range []string{mysqlpg.ModeLease, mysqlpg.ModeAdvisory} {
			t.Run(srv.kind+"/"+mode, func(t *testing.T) {
				h := newHarness(t, srv, mode)
				defer h.Close()
				f(t, h)
			})
		}
	}
}

// TestServerSideKill ends the holder's connections on the server
// (pg_terminate_backend, KILL CONNECTION) while the holder's process lives
// on. In lease mode the hold is a row, not a connection: the holder
// reconnects, keeps renewing, and nobody else gets the lock. In advisory
// mode the server frees the lock at once: the holder's Done fires at its
// next heartbeat, and the lock is free for others. How late Done fires,
// compared with the other client's acquisition, is measured.
func TestServerSideKill(t *testing.T) {
	each(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		a, b := h.open(t), h.open(t)
		lk, err := a.Lock(ctx, "kill")
		if err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		n, err := h.terminate(ctx, a)
		if err != nil || n == 0 {
			t.Fatalf("terminate: %d connections, %v", n, err)
		}
		if h.mode == mysqlpg.ModeLease {
			// Two TTLs: long enough for the hold to be lost if the
			// renewals did not find their way back.
			deadline := time.Now().Add(2 * h.TTL())
			for time.Now().Before(deadline) {
				if _, err := b.TryLock(ctx, "kill"); !errors.Is(err, padlock.ErrNotAcquired) {
					t.Fatalf("TryLock after the holder's connections were killed: %v, want ErrNotAcquired", err)
				}
				select {
				case <-lk.Done():
					t.Fatalf("lease hold lost after its connections were killed: %v", lk.Err())
				case <-time.After(h.TTL() / 4):
				}
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			return
		}
		lk2, err := b.Lock(ctx, "kill", padlock.WithWait(h.TTL()+10*time.Second))
		acquired := time.Now()
		if err != nil {
			t.Fatalf("the lock was not freed with the holder's connections: %v", err)
		}
		select {
		case <-lk.Done():
		case <-time.After(h.TTL() + 5*time.Second):
			t.Fatal("Done did not fire after the holder's connection was killed")
		}
		doneAt := time.Now()
		if !errors.Is(lk.Err(), padlock.ErrLost) {
			t.Errorf("Err = %v, want ErrLost", lk.Err())
		}
		if lk2.Token() <= lk.Token() {
			t.Errorf("token %d after the killed holder's %d", lk2.Token(), lk.Token())
		}
		t.Logf("lock free again %v after the kill; the old holder's Done fired %v after that (TTL %v)",
			acquired.Sub(killed), doneAt.Sub(acquired), h.TTL())
		if err := lk2.Unlock(ctx); err != nil {
			t.Fatal(err)
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
	})
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
		h.extra = url.Values{"request_timeout": {"60s"}, "dial_timeout": {"60s"}}
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
			if len(ids) > mysqlpg.DefaultPoolSize+1 {
				t.Errorf("a Locker has %d connections, more than its pool of %d and one listener", len(ids), mysqlpg.DefaultPoolSize)
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

// TestTokensSurviveRestart restarts the database between two holders of
// a name: the counter is durable, so the token still rises.
func TestTokensSurviveRestart(t *testing.T) {
	each(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		l := h.open(t)
		lk, err := l.Lock(ctx, "durable")
		if err != nil {
			t.Fatal(err)
		}
		first := lk.Token()
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := h.RestartServer(ctx); err != nil {
			t.Fatal(err)
		}
		l2 := h.open(t)
		lk, err = l2.Lock(ctx, "durable", padlock.WithWait(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if lk.Token() <= first {
			t.Errorf("token %d after a restart, not above %d", lk.Token(), first)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
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

// TestURLPassThrough checks that the drivers' own parameters reach them:
// a bad sslmode is refused by pgx, and an application_name names the
// connections on the server.
func TestURLPassThrough(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) {
			h := newHarness(t, srv, mysqlpg.ModeLease)
			defer h.Close()
			ctx := context.Background()
			l := h.open(t) // names its connections with application_name
			if ids, err := h.sessions(ctx, h.apps[l]); err != nil || len(ids) == 0 {
				t.Errorf("no connection named by application_name: %v, %v", ids, err)
			}
			if srv.kind != "postgres" {
				return
			}
			_, err := padlock.Open(ctx, h.url(srv.addr, url.Values{"sslmode": {"require"}}))
			if err == nil {
				t.Fatal("sslmode=require against a server without TLS: Open succeeded")
			}
			t.Logf("sslmode=require: %v", err)
		})
	}
}

// TestLostAnswerLeavesNothing sends a lease-mode acquisition whose answer
// is dropped: the database grants the row (a one-minute lease), the client
// never hears so and reports the outage. The driver must release that
// grant by its owner id once the database answers again, long before the
// lease would have run out.
func TestLostAnswerLeavesNothing(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) {
			ctx := context.Background()
			h := newHarness(t, srv, mysqlpg.ModeLease)
			defer h.Close()
			h.extra = url.Values{"request_timeout": {"1s"}}
			l := h.open(t, padlock.WithTTL(time.Minute))
			if _, err := l.TryLock(ctx, "warm"); err != nil { // table made, connections open
				t.Fatal(err)
			}
			conformance.WaitState(ctx, t, h, "warm-up lock held", 30*time.Second, func(s []string) bool { return len(s) == 1 })
			restore, err := h.proxyOf(l).DropAnswers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, err = l.TryLock(ctx, "lost")
			if !errors.Is(err, padlock.ErrUnavailable) {
				t.Errorf("TryLock with its answer dropped: %v, want ErrUnavailable", err)
			}
			// The grant reached the database: the proof that there is
			// something to undo.
			conformance.WaitState(ctx, t, h, "the unanswered grant on the server", 30*time.Second, func(s []string) bool {
				return slices.Contains(s, "lost")
			})
			if err := restore(); err != nil {
				t.Fatal(err)
			}
			conformance.WaitState(ctx, t, h, "the unanswered grant released", 30*time.Second, func(s []string) bool {
				return !slices.Contains(s, "lost")
			})
		})
	}
}
