package mysqlpg_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/mysqlpg"
	"github.com/padlock-go/padlock/padlocktest"
)

// eachAdvisory runs f in advisory mode on both databases, with every lock
// of a Locker on one holding session (pool_max_conns=1).
func eachAdvisory(t *testing.T, f func(t *testing.T, h *harness)) {
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) {
			h := newHarness(t, srv, mysqlpg.ModeAdvisory)
			defer h.Close()
			h.extra = url.Values{"pool_max_conns": {"1"}}
			f(t, h)
		})
	}
}

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

// A holding session that the server ended for idling (it held nothing) is
// replaced without an error, also when the next lock asks for a longer
// TTL (which first changes the session's idle timeout).
func TestAdvisoryIdleSessionReplaced(t *testing.T) {
	eachAdvisory(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		l := h.open(t, padlock.WithTTL(time.Second))
		lk, err := l.Lock(ctx, "idle")
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		waitNoSessions(t, h, h.apps[l]) // ended by the server's idle timeout
		lk, err = l.Lock(ctx, "idle", padlock.WithTTL(3*time.Second))
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

// waitedFor reports whether a PostgreSQL waiter has said, in name's row,
// that it waits for a NOTIFY.
func (h *harness) waitedFor(ctx context.Context, name string) bool {
	var yes bool
	err := h.admin.QueryRowContext(ctx, `SELECT coalesce(waiting_until > now(), false) FROM `+h.quoted()+` WHERE name = $1`, name).Scan(&yes)
	return err == nil && yes
}

// conformanceState checks the server's lock state.
func conformanceState(t *testing.T, h *harness, want []string) {
	t.Helper()
	got, err := h.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("server state %q, want %q", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("server state %q, want %q", got, want)
		}
	}
}
