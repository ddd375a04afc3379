package mysqlpg_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/mysqlpg"
	"github.com/padlock-go/padlock/padlocktest"
)

// Readers and permits in advisory mode, where the conformance suite
// cannot look: sessions killed on the server, rows left by dead sessions,
// the operator's view, and the limit rule's errors.

// advisoryRecipes runs f on both databases in advisory mode.
func advisoryRecipes(t *testing.T, f func(t *testing.T, h *harness, ctx context.Context)) {
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) {
			h := newHarness(t, srv, mysqlpg.ModeAdvisory)
			defer h.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			f(t, h, ctx)
		})
	}
}

// waitDone waits (generously: a loaded machine) for lk's Done, which a
// session killed on the server closes at once, not at the next renewal.
func waitDone(t *testing.T, what string, lk *padlock.Lock) {
	t.Helper()
	select {
	case <-lk.Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: Done did not close after its session was killed", what)
	}
	if !errors.Is(lk.Err(), padlock.ErrLost) {
		t.Errorf("%s: Err = %v, want ErrLost", what, lk.Err())
	}
}

// A reader whose session the server ends loses its share (Done closes)
// and the others keep theirs: a writer still waits for them, then gets
// the name once they are gone. A permit whose session the server ends
// frees its slot: a full semaphore admits another permit at once.
func TestAdvisoryRecipeSessionKilled(t *testing.T) {
	advisoryRecipes(t, func(t *testing.T, h *harness, ctx context.Context) {
		a, b, w := h.open(t), h.open(t), h.open(t)
		dead, err := a.RLock(ctx, "rw")
		if err != nil {
			t.Fatal(err)
		}
		alive, err := b.RLock(ctx, "rw")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.terminate(ctx, a); err != nil {
			t.Fatal(err)
		}
		waitDone(t, "killed reader", dead)
		conformanceState(t, h, []string{"rw"}) // the live reader only: the dead one's row names a mark nobody holds
		if lk, err := w.TryLock(ctx, "rw"); !errors.Is(err, padlock.ErrNotAcquired) {
			if lk != nil {
				lk.Unlock(ctx)
			}
			t.Fatalf("TryLock beside the surviving reader = %v, want ErrNotAcquired", err)
		}
		if err := alive.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		wl, err := w.TryLock(ctx, "rw")
		if err != nil {
			t.Fatalf("a writer after the readers: %v", err)
		}
		if wl.Token() <= max(dead.Token(), alive.Token()) {
			t.Errorf("writer's token %d is not above the readers' %d and %d", wl.Token(), dead.Token(), alive.Token())
		}
		if err := wl.Unlock(ctx); err != nil {
			t.Fatal(err)
		}

		c, d, e := h.open(t), h.open(t), h.open(t)
		limit := padlock.WithLimit(2)
		gone, err := c.Lock(ctx, "sem", limit)
		if err != nil {
			t.Fatal(err)
		}
		kept, err := d.Lock(ctx, "sem", limit)
		if err != nil {
			t.Fatal(err)
		}
		if lk, err := e.TryLock(ctx, "sem", limit); !errors.Is(err, padlock.ErrNotAcquired) {
			if lk != nil {
				lk.Unlock(ctx)
			}
			t.Fatalf("a third permit of two = %v, want ErrNotAcquired", err)
		}
		if _, err := h.terminate(ctx, c); err != nil {
			t.Fatal(err)
		}
		waitDone(t, "killed permit", gone)
		var next *padlock.Lock
		padlocktest.WaitFor(t, "the killed permit's slot free", 30*time.Second, func() bool {
			next, err = e.TryLock(ctx, "sem", limit)
			return err == nil
		})
		if next.Token() <= gone.Token() {
			t.Errorf("token %d after the killed permit's %d", next.Token(), gone.Token())
		}
		for _, lk := range []*padlock.Lock{next, kept} {
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		conformanceState(t, h, nil)
	})
}

// A permit's row left by a session that died records its limit, and that
// limit never blocks another: the row counts only while the session that
// holds its slot's lock also holds the mark the row names, so not even
// another session holding that slot's lock (taken by hand here) revives
// it.
func TestAdvisoryStaleLimitRow(t *testing.T) {
	advisoryRecipes(t, func(t *testing.T, h *harness, ctx context.Context) {
		a, b := h.open(t), h.open(t)
		old, err := a.Lock(ctx, "sem", padlock.WithLimit(3))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.terminate(ctx, a); err != nil {
			t.Fatal(err)
		}
		waitDone(t, "killed permit", old)
		q, take := `SELECT adv_key FROM %s WHERE name = $1 AND kind = 'P' AND lim = 3 AND owner IS NOT NULL`, `SELECT pg_try_advisory_lock($1)`
		if h.srv.kind == "mysql" {
			q, take = `SELECT adv_key FROM %s WHERE name = ? AND kind = 'P' AND lim = 3 AND owner IS NOT NULL`, `SELECT GET_LOCK(?, 0) = 1`
		}
		var slotKey any
		if err := h.admin.QueryRowContext(ctx, fmt.Sprintf(q, h.quoted()), "sem").Scan(&slotKey); err != nil {
			t.Fatalf("the dead permit's row, with its limit: %v", err)
		}
		if b, ok := slotKey.([]byte); ok {
			slotKey = string(b)
		}
		conn, err := h.admin.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var got bool
		if err := conn.QueryRowContext(ctx, take, slotKey).Scan(&got); err != nil || !got {
			t.Fatalf("taking the dead permit's slot lock by hand: %v, %v", got, err)
		}
		p, err := b.TryLock(ctx, "sem", padlock.WithLimit(2))
		if err != nil {
			t.Fatalf("a permit of 2 beside a dead session's row of 3 = %v, want granted", err)
		}
		if err := p.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// The limit rule's errors name both limits, both ways round, across
// Lockers and within one, and leave nothing: another limit on a
// semaphore, a plain lock and a reader on it, and a permit on a name that
// a writer or readers hold.
func TestAdvisoryLimitMismatch(t *testing.T) {
	advisoryRecipes(t, func(t *testing.T, h *harness, ctx context.Context) {
		a, b := h.open(t), h.open(t)
		mismatch := func(what string, held, asked int, try func() (*padlock.Lock, error)) {
			t.Helper()
			lk, err := try()
			if lk != nil {
				lk.Unlock(ctx)
			}
			if !errors.Is(err, padlock.ErrInvalidOption) ||
				!strings.Contains(err.Error(), fmt.Sprintf("with limit %d;", held)) ||
				!strings.Contains(err.Error(), fmt.Sprintf("asked with limit %d ", asked)) {
				t.Errorf("%s = %v, want ErrInvalidOption naming limits %d and %d", what, err, held, asked)
			}
		}
		p, err := a.Lock(ctx, "sem", padlock.WithLimit(3))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []*padlock.Locker{a, b} {
			mismatch("another limit", 3, 2, func() (*padlock.Lock, error) { return l.TryLock(ctx, "sem", padlock.WithLimit(2)) })
			mismatch("a plain lock", 3, 1, func() (*padlock.Lock, error) { return l.TryLock(ctx, "sem") })
			mismatch("a waiting plain lock", 3, 1, func() (*padlock.Lock, error) {
				return l.Lock(ctx, "sem", padlock.WithWait(time.Minute))
			})
			mismatch("a reader", 3, 1, func() (*padlock.Lock, error) { return l.TryRLock(ctx, "sem") })
		}
		w, err := a.Lock(ctx, "w")
		if err != nil {
			t.Fatal(err)
		}
		r, err := a.RLock(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []*padlock.Locker{a, b} {
			mismatch("a permit on a writer's name", 1, 2, func() (*padlock.Lock, error) { return l.TryLock(ctx, "w", padlock.WithLimit(2)) })
			mismatch("a permit on a reader's name", 1, 2, func() (*padlock.Lock, error) {
				return l.Lock(ctx, "r", padlock.WithLimit(2), padlock.WithWait(time.Minute))
			})
		}
		conformanceState(t, h, []string{"r", "sem", "w"})
		for _, lk := range []*padlock.Lock{p, w, r} {
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		conformanceState(t, h, nil)
	})
}

// Holders lists one line per reader (shared) and per permit (its limit);
// a force release ends every session that holds the name, so every reader
// learns it at once, each release is recorded, and a writer gets the
// name with a greater token. On PostgreSQL released readers leave no row
// behind.
func TestAdvisoryRecipeHoldersAndForce(t *testing.T) {
	advisoryRecipes(t, func(t *testing.T, h *harness, ctx context.Context) {
		a, b, c := h.open(t), h.open(t), h.open(t)
		r1, err := a.RLock(ctx, "rw")
		if err != nil {
			t.Fatal(err)
		}
		r2, err := b.RLock(ctx, "rw")
		if err != nil {
			t.Fatal(err)
		}
		p, err := c.Lock(ctx, "sem", padlock.WithLimit(3))
		if err != nil {
			t.Fatal(err)
		}
		hs, err := c.Holders(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[string][]string{}
		for _, ho := range hs {
			kinds[ho.Name] = append(kinds[ho.Name], fmt.Sprintf("%s/%d", ho.Mode, ho.Limit))
		}
		if got := strings.Join(kinds["rw"], ","); got != "shared/1,shared/1" {
			t.Errorf("Holders of two readers: %q, want two shared holds", got)
		}
		if got := strings.Join(kinds["sem"], ","); got != "exclusive/3" {
			t.Errorf("Holders of a permit: %q, want exclusive with limit 3", got)
		}
		if _, err := c.ForceUnlock(ctx, "rw"); err != nil {
			t.Fatal(err)
		}
		waitDone(t, "force-released reader 1", r1)
		waitDone(t, "force-released reader 2", r2)
		fr, err := c.ForcedReleases(ctx, "rw")
		if err != nil || len(fr) != 2 {
			t.Errorf("ForcedReleases after freeing two readers = %+v, %v: want both", fr, err)
		}
		w, err := c.TryLock(ctx, "rw")
		if err != nil {
			t.Fatalf("a writer after the readers were force-released: %v", err)
		}
		if w.Token() <= max(r1.Token(), r2.Token()) {
			t.Errorf("writer's token %d is not above the readers' %d and %d", w.Token(), r1.Token(), r2.Token())
		}
		r3, err := c.RLock(ctx, "other")
		if err != nil {
			t.Fatal(err)
		}
		for _, lk := range []*padlock.Lock{w, p, r3} {
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		conformanceState(t, h, nil)
		if h.srv.kind == "postgres" { // MySQL's readers hold slots, whose rows stay
			var rows int
			q := fmt.Sprintf(`SELECT count(*) FROM %s WHERE name = 'other' AND parent IS NOT NULL`, h.quoted())
			if err := h.admin.QueryRowContext(ctx, q).Scan(&rows); err != nil || rows != 0 {
				t.Errorf("a released reader's rows: %d, %v; want none", rows, err)
			}
		}
	})
}

// A name that readers or permits held (on MySQL its row stays in their
// group's state) is a writer's and a candidacy's again once they are gone,
// also when the last of them died with its connection.
func TestAdvisoryWriterAfterGroup(t *testing.T) {
	advisoryRecipes(t, func(t *testing.T, h *harness, ctx context.Context) {
		a, b := h.open(t), h.open(t)
		for _, name := range []string{"lk", "el"} {
			r, err := a.RLock(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		ld, err := b.Election("el").Campaign(ctx, "v")
		if err != nil {
			t.Fatalf("a candidacy after readers left: %v", err)
		}
		if got, err := b.Election("el").Leader(ctx); err != nil || got.Value != "v" {
			t.Errorf("Leader after readers left = %+v, %v; want v", got, err)
		}
		if err := ld.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		p, err := a.Lock(ctx, "lk", padlock.WithLimit(2))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.terminate(ctx, a); err != nil {
			t.Fatal(err)
		}
		waitDone(t, "killed permit", p)
		w, err := b.TryLock(ctx, "lk")
		if err != nil {
			t.Fatalf("a writer after the last permit died: %v", err)
		}
		if w.Token() <= p.Token() {
			t.Errorf("writer's token %d after the permit's %d", w.Token(), p.Token())
		}
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		conformanceState(t, h, nil)
	})
}

// More readers at once than one try asks slots for (on MySQL a try asks
// for slotWindow = 8 slots in one script, and the next 8 in another when
// those are taken), each on a Locker of its own, so that no Locker's own
// claims narrow the slots asked: all of them hold the name together, each
// token above the one before, a writer is refused while any holds, and
// takes the name once they are gone.
func TestAdvisoryManyReaders(t *testing.T) {
	advisoryRecipes(t, func(t *testing.T, h *harness, ctx context.Context) {
		const n = 12
		var (
			held []*padlock.Lock
			last uint64
		)
		for i := range n {
			r, err := h.open(t).TryRLock(ctx, "many")
			if err != nil {
				t.Fatalf("reader %d of %d beside the others: %v", i+1, n, err)
			}
			if r.Token() <= last {
				t.Errorf("reader %d's token %d is not above %d", i+1, r.Token(), last)
			}
			last = r.Token()
			held = append(held, r)
		}
		w := h.open(t)
		if _, err := w.TryLock(ctx, "many"); !errors.Is(err, padlock.ErrNotAcquired) {
			t.Fatalf("a writer beside %d readers: %v, want ErrNotAcquired", n, err)
		}
		for _, r := range held {
			if err := r.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		lk, err := w.TryLock(ctx, "many")
		if err != nil {
			t.Fatalf("a writer after the readers left: %v", err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
