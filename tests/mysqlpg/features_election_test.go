package mysqlpg_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/mysqlpg"
	"github.com/padlock-go/padlock/padlocktest"
)

// electRow is a name's row as the server has it.
type electRow struct {
	token   uint64
	owner   sql.NullString
	elect   sql.NullString
	value   []byte // nil: NULL
	expires int64  // expires_at in microseconds since an epoch
}

// row reads name's row directly, as the administrator.
func (h *harness) row(t *testing.T, ctx context.Context, name string) electRow {
	t.Helper()
	q := `SELECT token, owner, elect, elect_value, CASE WHEN isfinite(expires_at) THEN (extract(epoch FROM expires_at) * 1000000)::bigint END FROM %s WHERE name = $1`
	if h.srv.kind == "mysql" {
		q = `SELECT token, owner, elect, elect_value, TIMESTAMPDIFF(MICROSECOND, '2000-01-01', expires_at) FROM %s WHERE name = ?`
	}
	var r electRow
	var exp sql.NullInt64 // ±infinity on PostgreSQL
	if err := h.admin.QueryRowContext(ctx, fmt.Sprintf(q, h.quoted()), name).Scan(&r.token, &r.owner, &r.elect, &r.value, &exp); err != nil {
		t.Fatalf("row of %q: %v", name, err)
	}
	r.expires = exp.Int64
	return r
}

// depose takes a leader's term away without telling it: in lease mode its
// row's lease ends (on the database's clock), in advisory mode the server
// ends its connections, which frees its lock.
func (h *harness) depose(t *testing.T, ctx context.Context, l *padlock.Locker, name string) {
	t.Helper()
	if h.mode == mysqlpg.ModeAdvisory {
		if _, err := h.terminate(ctx, l); err != nil {
			t.Fatal(err)
		}
		return
	}
	q := `UPDATE %s SET expires_at = now() - interval '1 second' WHERE name = $1`
	if h.srv.kind == "mysql" {
		q = `UPDATE %s SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE name = ?`
	}
	if _, err := h.admin.ExecContext(ctx, fmt.Sprintf(q, h.quoted()), name); err != nil {
		t.Fatal(err)
	}
}

// A deposed leader that does not know it yet (its TTL is a minute, so its
// renewal is far off) sends its Proclaim to the server, which refuses it:
// ErrNotHeld, and the successor's value and token stand in the row.
func TestElectionDeposedProclaim(t *testing.T) {
	each(t, func(t *testing.T, h *harness) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		a, b := h.open(t, padlock.WithTTL(time.Minute)), h.open(t)
		first, err := a.Election("deposed").Campaign(ctx, "a1")
		if err != nil {
			t.Fatal(err)
		}
		h.depose(t, ctx, a, "deposed")
		second, err := b.Election("deposed").Campaign(ctx, "b1", padlock.WithWait(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer second.Resign(ctx)
		select {
		case <-first.Done():
			t.Fatal("the deposed leader's Done closed before its Proclaim: the server's check went untested")
		default:
		}
		if err := first.Proclaim(ctx, "a2"); !errors.Is(err, padlock.ErrNotHeld) {
			t.Fatalf("the deposed leader's Proclaim = %v, want ErrNotHeld", err)
		}
		r := h.row(t, ctx, "deposed")
		if string(r.value) != "b1" || r.token != second.Token() || r.elect != r.owner {
			t.Fatalf("row after the deposed Proclaim: value %q token %d elect %v owner %v; want b1, token %d, elect = owner",
				r.value, r.token, r.elect, r.owner, second.Token())
		}
	})
}

// Proclaim leaves the lease alone: the row's expiry, on the database's
// clock, is the same after it, and renewal goes on after it.
func TestElectionProclaimKeepsLease(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) {
			h := newHarness(t, srv, mysqlpg.ModeLease)
			defer h.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			// A minute's TTL: no renewal between the two reads.
			long := h.open(t, padlock.WithTTL(time.Minute))
			ld, err := long.Election("keeps").Campaign(ctx, "v1")
			if err != nil {
				t.Fatal(err)
			}
			before := h.row(t, ctx, "keeps")
			if err := ld.Proclaim(ctx, "v2"); err != nil {
				t.Fatal(err)
			}
			after := h.row(t, ctx, "keeps")
			if after.expires != before.expires || string(after.value) != "v2" || after.token != before.token {
				t.Fatalf("Proclaim changed the row from %+v to %+v: want the same expiry and token, value v2", before, after)
			}
			// Proclaiming the value it has is no loss (MySQL counts a
			// row it did not change as not matched).
			if err := ld.Proclaim(ctx, "v2"); err != nil {
				t.Fatalf("Proclaim of the same value: %v", err)
			}
			if err := ld.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			if r := h.row(t, ctx, "keeps"); r.value != nil || r.owner.Valid {
				t.Fatalf("row after Resign: %+v, want no owner and no value", r)
			}

			// The harness TTL (2s): renewal moves the expiry on after a
			// Proclaim, and the leader stays leader past several TTLs.
			short := h.open(t)
			ld, err = short.Election("renews").Campaign(ctx, "v1")
			if err != nil {
				t.Fatal(err)
			}
			defer ld.Resign(ctx)
			if err := ld.Proclaim(ctx, "v2"); err != nil {
				t.Fatal(err)
			}
			proclaimed := h.row(t, ctx, "renews").expires
			padlocktest.WaitFor(t, "a renewal after the Proclaim", 30*time.Second, func() bool {
				return h.row(t, ctx, "renews").expires > proclaimed+h.TTL().Microseconds()
			})
			select {
			case <-ld.Done():
				t.Fatalf("the leader lost its term after a Proclaim: %v", ld.Err())
			default:
			}
			got, err := short.Election("renews").Leader(ctx)
			if err != nil || got != (padlock.Leader{Value: "v2", Token: ld.Token()}) {
				t.Fatalf("Leader after renewals = %+v, %v; want v2, token %d", got, err, ld.Token())
			}
		})
	}
}

// In advisory mode a row whose session died is no leader, even while
// another session holds the name's lock and has not written the row (as
// the next holder does between its lock and its row on MySQL, and within
// its statement on PostgreSQL): the row names a session mark nobody holds.
func TestElectionDeadSessionNoLeader(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) {
			h := newHarness(t, srv, mysqlpg.ModeAdvisory)
			defer h.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			a, o := h.open(t, padlock.WithTTL(time.Minute)), h.open(t)
			ld, err := a.Election("dead").Campaign(ctx, "a1")
			if err != nil {
				t.Fatal(err)
			}
			if got, err := o.Election("dead").Leader(ctx); err != nil || got.Value != "a1" {
				t.Fatalf("Leader = %+v, %v; want a1", got, err)
			}
			if _, err := h.terminate(ctx, a); err != nil {
				t.Fatal(err)
			}
			padlocktest.WaitFor(t, "no leader once the session died", 30*time.Second, func() bool {
				_, err := o.Election("dead").Leader(ctx)
				return errors.Is(err, padlock.ErrNoLeader)
			})
			// Another session takes the name's lock by hand; the row still
			// names the dead candidacy as its holder.
			conn, err := h.admin.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			take := `SELECT pg_try_advisory_lock(adv_key) FROM %s WHERE name = $1`
			if srv.kind == "mysql" {
				take = `SELECT GET_LOCK(adv_key, 0) = 1 FROM %s WHERE name = ?`
			}
			var got bool
			if err := conn.QueryRowContext(ctx, fmt.Sprintf(take, h.quoted()), "dead").Scan(&got); err != nil || !got {
				t.Fatalf("taking the name's lock by hand: %v, %v", got, err)
			}
			if r := h.row(t, ctx, "dead"); string(r.value) != "a1" || r.elect != r.owner || r.token != ld.Token() {
				t.Fatalf("the dead candidacy's row = %+v, want it still naming a1", r)
			}
			if got, err := o.Election("dead").Leader(ctx); !errors.Is(err, padlock.ErrNoLeader) {
				t.Fatalf("Leader while another session holds the lock and the row names the dead candidacy = %+v, %v; want ErrNoLeader", got, err)
			}
			if err := ld.Proclaim(ctx, "a2"); !errors.Is(err, padlock.ErrNotHeld) {
				t.Fatalf("the dead session's Proclaim = %v, want ErrNotHeld", err)
			}
			if r := h.row(t, ctx, "dead"); string(r.value) != "a1" {
				t.Fatalf("the dead session's Proclaim wrote %q", r.value)
			}
		})
	}
}

// Holders shows a candidacy's value, a plain lock as no candidacy, and a
// forced release removes the candidacy with its value.
func TestElectionHoldersAndForce(t *testing.T) {
	each(t, func(t *testing.T, h *harness) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		a, op := h.open(t), h.open(t)
		ld, err := a.Election("cand").Campaign(ctx, "here")
		if err != nil {
			t.Fatal(err)
		}
		lk, err := a.Lock(ctx, "plain")
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Unlock(ctx)
		hs, err := op.Holders(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[string]string{}
		for _, x := range hs {
			kinds[x.Name] = fmt.Sprintf("%v:%s", x.Elect, x.Value)
		}
		if kinds["cand"] != "true:here" || kinds["plain"] != "false:" {
			t.Fatalf("Holders = %+v: want cand a candidacy with its value, plain no candidacy", hs)
		}
		if _, err := op.Election("plain").Leader(ctx); !errors.Is(err, padlock.ErrNoLeader) {
			t.Fatalf("Leader of a name a plain lock holds = %v, want ErrNoLeader", err)
		}
		if _, err := op.ForceUnlock(ctx, "cand"); err != nil {
			t.Fatal(err)
		}
		if r := h.row(t, ctx, "cand"); r.value != nil || r.elect.Valid {
			t.Fatalf("row after ForceUnlock = %+v, want no candidacy and no value", r)
		}
		if _, err := op.Election("cand").Leader(ctx); !errors.Is(err, padlock.ErrNoLeader) {
			t.Fatalf("Leader after ForceUnlock = %v, want ErrNoLeader", err)
		}
		select {
		case <-ld.Done():
		case <-ctx.Done():
			t.Fatal("the forced-out leader's Done is still open")
		}
	})
}

// A lock table made before elections gets their columns when a Locker
// that may alter it opens it; one it may not alter leaves Elections
// false, and Campaign answers ErrUnsupported, while locks work.
func TestElectionColumnsAdded(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) {
			h := newHarness(t, srv, mysqlpg.ModeLease)
			defer h.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			ddl := tableDDL(t, h)
			var old []string
			for _, line := range strings.Split(ddl, "\n") {
				switch {
				case strings.Contains(line, "elect") || strings.Contains(line, "adv_mark"):
				case strings.Contains(line, "parent "):
					old = append(old, strings.Replace(line, ",", "", 1))
				default:
					old = append(old, line)
				}
			}
			if _, err := h.admin.ExecContext(ctx, strings.Join(old, "\n")); err != nil {
				t.Fatalf("old table: %v", err)
			}
			u, _ := url.Parse(srv.url)
			if srv.kind == "postgres" {
				// The administrator's table: padlock's user may use it,
				// not alter it.
				if _, err := h.admin.ExecContext(ctx, fmt.Sprintf("GRANT SELECT, INSERT, UPDATE ON %s TO %q", h.quoted(), u.User.Username())); err != nil {
					t.Fatal(err)
				}
				l := h.open(t)
				if l.Capabilities().Elections {
					t.Fatal("Elections on a table without their columns")
				}
				if _, err := l.Election("e").Campaign(ctx, "v"); !errors.Is(err, padlock.ErrUnsupported) {
					t.Fatalf("Campaign without the columns = %v, want ErrUnsupported", err)
				}
				lk, err := l.Lock(ctx, "e")
				if err != nil {
					t.Fatal(err)
				}
				if err := lk.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := h.admin.ExecContext(ctx, fmt.Sprintf("ALTER TABLE %s OWNER TO %q", h.quoted(), u.User.Username())); err != nil {
					t.Fatal(err)
				}
			}
			l := h.open(t)
			if !l.Capabilities().Elections {
				t.Fatal("no Elections once the Locker could add their columns")
			}
			ld, err := l.Election("e").Campaign(ctx, "v")
			if err != nil {
				t.Fatal(err)
			}
			if r := h.row(t, ctx, "e"); string(r.value) != "v" {
				t.Fatalf("value in the upgraded table = %q", r.value)
			}
			if err := ld.Resign(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// On PostgreSQL Observe is pushed by NOTIFY: with an observer whose poll
// is an hour apart, it still reports a grant, a Proclaim, a resignation
// (no leader) and the next grant. Once its context ends the watch's
// goroutine is gone, and once its Locker closes, its listening connection.
func TestElectionWatchPush(t *testing.T) {
	for _, mode := range []string{mysqlpg.ModeLease, mysqlpg.ModeAdvisory} {
		t.Run(mode, func(t *testing.T) {
			srv := servers(t)[0]
			if srv.kind != "postgres" {
				t.Fatal("servers(t)[0] is not PostgreSQL")
			}
			h := newHarness(t, srv, mode)
			defer h.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			a, b := h.open(t), h.open(t)
			o, err := h.NewLocker(ctx, padlock.WithTTL(time.Hour)) // Observe polls every 20 minutes
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { o.Close() })
			h.mu.Lock()
			app := h.apps[o]
			h.mu.Unlock()

			octx, ocancel := context.WithCancel(ctx)
			defer ocancel()
			seen := o.Election("push").Observe(octx)
			if first := <-seen; first != (padlock.Leader{}) {
				t.Fatalf("Observe's first value = %+v, want no leader", first)
			}
			var (
				mu    sync.Mutex
				last  padlock.Leader
				ended = make(chan struct{})
			)
			go func() {
				defer close(ended)
				for ld := range seen {
					mu.Lock()
					last = ld
					mu.Unlock()
				}
			}()
			reports := func(what string, want padlock.Leader) {
				t.Helper()
				padlocktest.WaitFor(t, "Observe to report "+what, 60*time.Second, func() bool {
					mu.Lock()
					defer mu.Unlock()
					return last == want
				})
			}
			first, err := a.Election("push").Campaign(ctx, "a1")
			if err != nil {
				t.Fatal(err)
			}
			reports("the grant", padlock.Leader{Value: "a1", Token: first.Token()})
			if err := first.Proclaim(ctx, "a2"); err != nil {
				t.Fatal(err)
			}
			reports("the Proclaim", padlock.Leader{Value: "a2", Token: first.Token()})
			if err := first.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			reports("no leader after the resignation", padlock.Leader{})
			second, err := b.Election("push").Campaign(ctx, "b1")
			if err != nil {
				t.Fatal(err)
			}
			defer second.Resign(ctx)
			reports("the next grant", padlock.Leader{Value: "b1", Token: second.Token()})

			ocancel()
			<-ended
			padlocktest.WaitFor(t, "the watch goroutine to end", 30*time.Second, func() bool { return !watchRunning() })
			if err := o.Close(); err != nil {
				t.Fatal(err)
			}
			padlocktest.WaitFor(t, "the observer's listening connection to go", 30*time.Second, func() bool {
				return !h.listening(ctx, app)
			})
		})
	}
}

// watchRunning reports whether a Watch goroutine of the driver runs.
func watchRunning() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Contains(buf[:n], []byte("mysqlpg.(*waiter).closeWhenDone"))
		}
		buf = make([]byte, 2*len(buf))
	}
}

// A campaign whose caller gives up while its grant is on the way (the
// statement runs detached, so the grant arrives) undoes the grant as a
// resignation does: the value goes from the row, where a plain unlock
// left it behind, naming a term that never began (and on PostgreSQL no
// notice told an observer that had seen the grant). The grant's write is
// stretched by a trigger, and the campaign cancelled while it sleeps.
func TestElectionCancelledAsGrantedLeavesNoValue(t *testing.T) {
	advisoryRecipes(t, func(t *testing.T, h *harness, ctx context.Context) {
		a, o := h.open(t), h.open(t)
		first, err := a.Election("late").Campaign(ctx, "a0") // makes the table and the row
		if err != nil {
			t.Fatal(err)
		}
		if err := first.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		trigger := []string{
			`CREATE FUNCTION ` + h.table + `_slow() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN
					PERFORM pg_sleep(2);
					RETURN NEW;
				END $$`,
			`CREATE TRIGGER slow_grant BEFORE UPDATE ON ` + h.quoted() +
				` FOR EACH ROW WHEN (NEW.elect_value = 'c1'::bytea) EXECUTE FUNCTION ` + h.table + `_slow()`,
		}
		drop := []string{`DROP TRIGGER slow_grant ON ` + h.quoted(), `DROP FUNCTION ` + h.table + `_slow()`}
		sleeping := `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'`
		if h.srv.kind == "mysql" {
			trigger = []string{`CREATE TRIGGER slow_grant BEFORE UPDATE ON ` + h.quoted() +
				` FOR EACH ROW BEGIN IF NEW.elect_value = 'c1' THEN SET @slept = SLEEP(2); END IF; END`}
			drop = []string{`DROP TRIGGER slow_grant`}
			sleeping = `SELECT count(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User sleep'`
		}
		for _, q := range trigger {
			if _, err := h.admin.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		defer func() {
			for _, q := range drop {
				if _, err := h.admin.ExecContext(context.Background(), q); err != nil {
					t.Errorf("%s: %v", q, err)
				}
			}
		}()
		cctx, giveUp := context.WithCancel(ctx)
		defer giveUp()
		done := make(chan error, 1)
		go func() {
			ld, err := a.Election("late").Campaign(cctx, "c1")
			if err == nil {
				ld.Resign(ctx)
				err = errors.New("the campaign was granted after it was cancelled")
			}
			done <- err
		}()
		padlocktest.WaitFor(t, "the grant's write sleeping in the trigger", time.Minute, func() bool {
			var n int
			return h.stats.QueryRowContext(ctx, sleeping).Scan(&n) == nil && n > 0
		})
		giveUp()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("the cancelled campaign = %v, want context.Canceled", err)
		}
		padlocktest.WaitFor(t, "the cancelled candidacy's value off the row", 30*time.Second, func() bool {
			return !bytes.Equal(h.row(t, ctx, "late").value, []byte("c1"))
		})
		if got, err := o.Election("late").Leader(ctx); !errors.Is(err, padlock.ErrNoLeader) {
			t.Fatalf("Leader after the cancelled campaign = %+v, %v; want ErrNoLeader", got, err)
		}
	})
}
