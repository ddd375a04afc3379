package mysqlpg_test

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/mysqlpg"
)

// A holding session that the server ended for idling (it held nothing) is
// replaced without an error, also when the next lock asks for a longer
// TTL (which first changes the session's idle timeout).
func TestAdvisoryIdleSessionReplaced(t *testing.T) {
	eachAdvisory(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		l := h.open(t, padlock.WithTTL(time.Second))
		conformance.Cycle(ctx, t, l, "idle")
		waitNoSessions(t, h, h.apps[l]) // ended by the server's idle timeout
		lk, err := l.Lock(ctx, "idle", padlock.WithTTL(3*time.Second))
		if err != nil {
			t.Fatalf("Lock after the server ended the idle session: %v", err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// When the driver learns that a holding session died (here: the next
// statement on it fails, after the server killed it), every hold on it is
// lost at once, not at its next renewal.
func TestAdvisorySessionDeathEndsAllHolds(t *testing.T) {
	eachAdvisory(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		a := h.open(t, padlock.WithTTL(time.Minute)) // renewals 20s apart
		x, err := a.Lock(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		y, err := a.Lock(ctx, "y")
		if err != nil {
			t.Fatal(err)
		}
		if n, err := h.terminate(ctx, a); err != nil || n == 0 {
			t.Fatalf("terminate: %d, %v", n, err)
		}
		// The next statement on the session finds it dead.
		if lk, err := a.TryLock(ctx, "z"); err == nil {
			lk.Unlock(ctx)
		}
		for _, lk := range []*padlock.Lock{x, y} {
			select {
			case <-lk.Done():
				if !errors.Is(lk.Err(), padlock.ErrLost) {
					t.Errorf("%s: Err = %v, want ErrLost", lk.Name(), lk.Err())
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s still held 10s after its session died (renewal is 20s away)", lk.Name())
			}
		}
	})
}

// An advisory lock belongs to its connection. When the connection is
// gone (here killed by the server), the server has freed the lock, and
// Unlock says so: ErrNotHeld, not an outage retried in the background.
func TestAdvisoryUnlockAfterKill(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) {
			ctx := context.Background()
			h := newHarness(t, srv, mysqlpg.ModeAdvisory)
			defer h.Close()
			// A long lease: no renewal finds the connection dead first.
			a, b := h.open(t, padlock.WithTTL(time.Minute)), h.open(t)
			lk, err := a.Lock(ctx, "killed")
			if err != nil {
				t.Fatal(err)
			}
			if n, err := h.terminate(ctx, a); err != nil || n == 0 {
				t.Fatalf("terminate: %d connections, %v", n, err)
			}
			err = lk.Unlock(ctx)
			if !errors.Is(err, padlock.ErrNotHeld) || errors.Is(err, padlock.ErrUnavailable) || strings.Contains(err.Error(), "background") {
				t.Errorf("Unlock of a hold whose connection the server killed: %v, want ErrNotHeld", err)
			}
			// And it is true: the lock is free.
			lk2, err := b.TryLock(ctx, "killed")
			if err != nil {
				t.Fatalf("TryLock after the holder's connection was killed: %v", err)
			}
			if err := lk2.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
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

// TestLostAnswerLeavesNothing sends a lease-mode acquisition whose answer
// is dropped: the database grants the row (a one-minute lease), the client
// never hears so and reports the outage. The driver must release that
// grant by its owner id once the database answers again, long before the
// lease would have run out. It does so for a writer (the name row) and for
// a reader (a slot row, which on PostgreSQL goes with its commit in one
// round trip, so that the client does not even know which slot it got).
func TestLostAnswerLeavesNothing(t *testing.T) {
	for _, srv := range servers(t) {
		for _, reader := range []bool{false, true} {
			kind := "writer"
			if reader {
				kind = "reader"
			}
			t.Run(srv.kind+"/"+kind, func(t *testing.T) {
				ctx := context.Background()
				h := newHarness(t, srv, mysqlpg.ModeLease)
				defer h.Close()
				h.extra = url.Values{"request_timeout": {"1s"}}
				l := h.open(t, padlock.WithTTL(time.Minute))
				// The table made, the connection open and its statements
				// prepared (pgx prepares a statement on its first use).
				if _, err := l.TryLock(ctx, "warm"); err != nil {
					t.Fatal(err)
				}
				if _, err := l.TryRLock(ctx, "warm-reader"); err != nil {
					t.Fatal(err)
				}
				conformance.WaitState(ctx, t, h, "warm-up locks held", 30*time.Second, func(s []string) bool { return len(s) == 2 })
				restore, err := h.proxies.Of(l)[0].DropAnswers(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if reader {
					_, err = l.TryRLock(ctx, "lost")
				} else {
					_, err = l.TryLock(ctx, "lost")
				}
				if !errors.Is(err, padlock.ErrUnavailable) {
					t.Errorf("a %s's TryLock with its answer dropped: %v, want ErrUnavailable", kind, err)
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
}
