package mysqlpg_test

import (
	"context"
	"errors"
	"fmt"
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

// Waiting writers queue on the server, in lease and advisory mode (mysqlpg's
// queue.go on MySQL, queue_pg.go and queue_pg_advisory.go on PostgreSQL),
// so a holder that locks again right after its release cannot pass them
// by.
// Four clients each hold one name until every other client waits for it
// (one heads the queue, the others wait for its lock), and lock it again
// at once, with a minute's lease (no wait may end by a lease running out).
// With waiters that poll, the releasing client won nearly every race (and
// nobody waits for a queue's lock: the test fails); with the queue each
// client, on its release, joins the back of the queue, and the name goes
// round: every client gets its share of the acquisitions, in turn.
func TestQueueNoStarvation(t *testing.T) {
	for _, srv := range servers(t) {
		for _, mode := range []string{mysqlpg.ModeLease, mysqlpg.ModeAdvisory} {
			t.Run(srv.kind+"/"+mode, func(t *testing.T) { testQueueNoStarvation(t, srv, mode) })
		}
	}
}

func testQueueNoStarvation(t *testing.T, srv server, mode string) {
	h := newHarness(t, srv, mode)
	defer h.Close()
	lockers := make([]*padlock.Locker, 4)
	for i := range lockers {
		lockers[i] = h.open(t, padlock.WithTTL(time.Minute))
	}
	queueRound(t, h, lockers, "round")
}

// queueRound has each of the lockers take name each times in turn, as
// testQueueNoStarvation says, and checks that they did take it in turn.
func queueRound(t *testing.T, h *harness, lockers []*padlock.Locker, name string) {
	const each = 6
	clients := len(lockers)
	ctx := context.Background()
	var (
		mu    sync.Mutex
		order []int // who acquired, in order
	)
	// The first acquisition is taken before the others start, so that
	// all of them find the name held and queue.
	first, err := lockers[0].Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, clients)
	watch := newQueueWatch(h)
	remaining := make([]atomic.Int32, clients) // acquisitions each client has left
	apps := make([]string, clients)            // each client's connections' application name
	h.mu.Lock()
	for i := range clients {
		remaining[i].Store(each)
		apps[i] = h.apps[lockers[i]]
	}
	h.mu.Unlock()
	for i, l := range lockers {
		go func() {
			var lk *padlock.Lock
			if i == 0 {
				lk = first
			}
			for n := range each {
				if lk == nil {
					var err error
					if lk, err = l.Lock(ctx, name, padlock.WithWait(60*time.Second)); err != nil {
						errs <- fmt.Errorf("client %d, acquisition %d: %w", i, n, err)
						return
					}
				}
				remaining[i].Add(-1)
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				// The critical section lasts until every other client
				// that has acquisitions left waits: one heads the queue,
				// the rest wait for its lock. So the order is the queue's,
				// not that of a race between the release and a re-lock.
				var others []string
				for j := range clients {
					if j != i && remaining[j].Load() > 0 {
						others = append(others, apps[j])
					}
				}
				if err := watch.awaitQueued(ctx, others); err != nil {
					errs <- fmt.Errorf("client %d, acquisition %d: %w", i, n, err)
					return
				}
				if err := lk.Unlock(ctx); err != nil {
					errs <- err
					return
				}
				lk = nil
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// In turn: between two acquisitions of one client, every other client
	// that still had acquisitions to make got one. (A client that has made
	// its last leaves the round.)
	var b strings.Builder
	for _, c := range order {
		fmt.Fprint(&b, c)
	}
	t.Logf("order of acquisitions: %s", b.String())
	done := make([]int, clients)
	last := make([]int, clients) // index in order of each client's latest acquisition
	for i := range last {
		last[i] = -1
	}
	for k, c := range order {
		if last[c] >= 0 {
			for other := range clients {
				if other != c && done[other] < each && last[other] < last[c] {
					t.Fatalf("client %d acquired twice (places %d and %d) while client %d, queued, got none: %s",
						c, last[c], k, other, b.String())
				}
			}
		}
		done[c]++
		last[c] = k
	}
	if n := inQueue(t, h); n != 0 {
		t.Errorf("%d connections still wait in a queue", n)
	}
}

// inQueue counts the connections that wait for a queue lock: in GET_LOCK
// on MySQL, for an advisory lock on PostgreSQL.
func inQueue(t *testing.T, h *harness) int {
	n, err := waitingIn(context.Background(), h, "")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitingIn counts app's connections ("": anyone's) that wait for a queue
// lock.
func waitingIn(ctx context.Context, h *harness, app string) (int, error) {
	q := `SELECT count(*) FROM information_schema.PROCESSLIST p
		LEFT JOIN performance_schema.session_connect_attrs a ON a.PROCESSLIST_ID = p.ID AND a.ATTR_NAME = 'program_name'
		WHERE p.INFO LIKE '%GET_LOCK(''padlock-q:%' AND p.ID <> CONNECTION_ID() AND (? = '' OR a.ATTR_VALUE = ?)`
	if h.srv.kind == "postgres" {
		q = `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'advisory' AND NOT l.granted AND ($1 = '' OR a.application_name = $2)`
	}
	var n int
	err := h.admin.QueryRowContext(ctx, q, app, app).Scan(&n)
	return n, err
}

// queueWatch tells which clients are in a name's queue: waiting for its
// queue lock, or heading it (holding that lock). keys are the queue locks
// seen waited for so far (MySQL: the lock's name; PostgreSQL: the
// advisory lock's classid/objid/objsubid): a head with nobody behind it is
// found by the lock it holds, learnt while others waited for it.
type queueWatch struct {
	h    *harness
	mu   sync.Mutex
	keys map[string]bool
}

func newQueueWatch(h *harness) *queueWatch { return &queueWatch{h: h, keys: map[string]bool{}} }

// queued returns the applications with a connection in a queue.
func (w *queueWatch) queued(ctx context.Context) (map[string]bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// Each row: an application, a queue lock, and whether it holds it
	// (else it waits for it).
	q := `SELECT COALESCE(a.ATTR_VALUE, ''), SUBSTRING_INDEX(SUBSTRING_INDEX(p.INFO, 'GET_LOCK(''', -1), '''', 1), FALSE
		FROM information_schema.PROCESSLIST p
		LEFT JOIN performance_schema.session_connect_attrs a ON a.PROCESSLIST_ID = p.ID AND a.ATTR_NAME = 'program_name'
		WHERE p.INFO LIKE '%GET_LOCK(''padlock-q:%' AND p.ID <> CONNECTION_ID()`
	if w.h.srv.kind == "postgres" {
		q = `SELECT a.application_name, l.classid || '/' || l.objid || '/' || l.objsubid, l.granted
			FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'advisory' AND a.pid <> pg_backend_pid()`
	}
	type row struct {
		app, key string
		granted  bool
	}
	var rows []row
	scan := func(q string, args ...any) error {
		rs, err := w.h.admin.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			var r row
			if err := rs.Scan(&r.app, &r.key, &r.granted); err != nil {
				return err
			}
			rows = append(rows, r)
		}
		return rs.Err()
	}
	if err := scan(q); err != nil {
		return nil, err
	}
	if w.h.srv.kind != "postgres" {
		// MySQL lists a lock's holder only by asking for that lock.
		for key := range w.keys {
			if err := scan(`SELECT COALESCE(a.ATTR_VALUE, ''), ?, TRUE FROM information_schema.PROCESSLIST p
				LEFT JOIN performance_schema.session_connect_attrs a ON a.PROCESSLIST_ID = p.ID AND a.ATTR_NAME = 'program_name'
				WHERE p.ID = IS_USED_LOCK(?)`, key, key); err != nil {
				return nil, err
			}
		}
	}
	for _, r := range rows {
		if !r.granted {
			w.keys[r.key] = true
		}
	}
	in := map[string]bool{}
	for _, r := range rows {
		if !r.granted || w.keys[r.key] {
			in[r.app] = true
		}
	}
	return in, nil
}

// awaitQueued waits until every client of apps is in the queue: one
// heads it, the others wait for its lock. Counting the waiters alone was
// not enough: a head just granted the queue's lock can still show its
// wait, and it was counted as a waiter while the last client was not in
// the queue yet.
func (w *queueWatch) awaitQueued(ctx context.Context, apps []string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		in, err := w.queued(ctx)
		if err != nil {
			return err
		}
		missing := slices.DeleteFunc(slices.Clone(apps), func(app string) bool { return in[app] })
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d other clients in the queue after 30s (missing %q)", len(apps)-len(missing), len(apps), missing)
		}
		time.Sleep(5 * time.Millisecond) // the next look
	}
}

// PostgreSQL grants an awaited lock even as it raises the wait's
// lock_timeout (LockErrorCleanup keeps a lock granted while the timeout
// was being handled), and a session-level advisory lock outlives the
// failed statement: a waiter whose wait for a name's queue lock timed out
// that way held the queue's lock without knowing. Its next join then
// counted the lock twice, and its leave let go of it once: the queue's
// lock stayed with an idle connection of the waits pool, and every other
// waiter's try, which respects the queue, was refused until that
// connection closed (a rehearsal's TestStress/postgres/advisory had a
// Lock wait two minutes). Made to happen here: a waiter's server process
// is stopped (SIGSTOP) while it waits for the queue's lock, the head ahead
// of it takes the name and leaves the queue (so the server grants the
// stopped process the lock) and its lock_timeout passes; resumed, it
// fails the wait holding the lock. Once everyone has unlocked, no session
// of the test's Lockers may hold an advisory lock. Fails with the queue
// connection's doubt (mysqlpg's queueConn) disabled.
func TestQueueLockGrantedAsItsWaitTimesOut(t *testing.T) {
	srv := servers(t)[0]
	if srv.kind != "postgres" {
		t.Fatal("servers(t)[0] is not PostgreSQL")
	}
	for _, mode := range []string{mysqlpg.ModeLease, mysqlpg.ModeAdvisory} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t, srv, mode)
			defer h.Close()
			ctx := context.Background()
			// A step's pipeline is bounded by the request timeout and
			// the queue's wait (5s): the stopped process must run again
			// within that, after the head's hand-off, on a loaded
			// machine. The queue's wait does not depend on it.
			h.extra = url.Values{"request_timeout": {"60s"}}
			long := padlock.WithTTL(time.Minute)
			a, b, c := h.open(t, long), h.open(t, long), h.open(t, long)
			const name = "timed-out-join"
			advisoryLocks := func(l *padlock.Locker, granted bool) []int64 {
				t.Helper()
				return h.pids(ctx, t, `SELECT l.pid FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid
					WHERE l.locktype = 'advisory' AND l.granted = $1 AND s.application_name = $2`, granted, h.apps[l])
			}
			la, err := a.Lock(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			type got struct {
				lk  *padlock.Lock
				err error
			}
			bGot, cGot := make(chan got, 1), make(chan got, 1)
			go func() {
				lk, err := b.Lock(ctx, name, padlock.WithWait(2*time.Minute))
				bGot <- got{lk, err}
			}()
			padlocktest.WaitFor(t, "the second client heading the name's queue", time.Minute, func() bool { return len(advisoryLocks(b, true)) > 0 })
			go func() {
				lk, err := c.Lock(ctx, name, padlock.WithWait(2*time.Minute))
				cGot <- got{lk, err}
			}()
			pid, resume := stopOne(t, "the third client waiting for the queue's lock", func() []int64 { return advisoryLocks(c, false) })
			if err := la.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			r := <-bGot
			if r.err != nil {
				t.Fatal(r.err)
			}
			padlocktest.WaitFor(t, "the stopped process granted the queue's lock", time.Minute, func() bool { return len(advisoryLocks(c, true)) > 0 })
			// Its lock_timeout (the queue's chunk of 5s, mysqlpg's
			// queueChunk) must pass before it runs again, on the server's
			// clock: from when its wait began.
			padlocktest.WaitFor(t, "the stopped wait's lock_timeout passing", time.Minute, func() bool {
				var past bool
				err := h.stats.QueryRowContext(ctx, `SELECT coalesce(bool_and(now() > s.query_start + interval '5.3 seconds'), false)
					FROM pg_stat_activity s WHERE s.pid = $1`, pid).Scan(&past)
				return err == nil && past
			})
			resume()
			if err := r.lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			r = <-cGot
			if r.err != nil {
				t.Fatalf("the resumed waiter's Lock: %v", r.err)
			}
			if err := r.lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			for _, l := range []*padlock.Locker{a, b, c} {
				if pids := advisoryLocks(l, true); len(pids) > 0 {
					t.Errorf("nobody holds or waits for the name, yet sessions %v of a Locker hold advisory locks (a queue's lock left behind)", pids)
				}
			}
		})
	}
}

// A wait in a name's queue that its deadline ends returns at that
// deadline, even when every connection of the Locker's pool is a holding
// session's (advisory mode pins one per session): ending the queue's
// statement must not wait for a connection of the pool. Before, the
// cancel (pg_cancel_backend, KILL QUERY) was sent from the pool and
// waited for a connection for the whole request timeout (here 60s)
// before the Lock returned. Other clients head the queue and wait in it,
// so that the Locker under test waits for the queue's lock when its
// deadline comes.
func TestQueuedWaitEndsWithThePoolPinned(t *testing.T) {
	eachAdvisory(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		h.extra = url.Values{"pool_max_conns": {"1"}, "request_timeout": {"60s"}}
		long := padlock.WithTTL(time.Minute)
		m, k1, k2, l := h.open(t, long), h.open(t, long), h.open(t, long), h.open(t, long)
		const name = "pinned-pool"
		lm, err := m.Lock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		defer lm.Unlock(ctx)
		kctx, kcancel := context.WithCancel(ctx)
		var kwg sync.WaitGroup
		defer func() {
			kcancel()
			kwg.Wait()
		}()
		wait := func(k *padlock.Locker) {
			kwg.Go(func() {
				if lk, err := k.Lock(kctx, name); err == nil {
					lk.Unlock(ctx)
				}
			})
		}
		wait(k1)
		wait(k2)
		// One of them heads the queue, so the other waits for its lock.
		padlocktest.WaitFor(t, "a client waiting in the name's queue", time.Minute, func() bool {
			return h.inQueue(ctx, t, k1) || h.inQueue(ctx, t, k2)
		})
		other, err := l.Lock(ctx, "pinned-pool-other") // its one session, on its one connection
		if err != nil {
			t.Fatal(err)
		}
		defer other.Unlock(ctx)
		const within = 3 * time.Second
		start := time.Now()
		_, err = l.Lock(ctx, name, padlock.WithWait(within))
		took := time.Since(start)
		if !errors.Is(err, padlock.ErrTimeout) {
			t.Fatalf("Lock behind a held name and its queue: %v, want ErrTimeout", err)
		}
		if took > 30*time.Second {
			t.Errorf("a Lock whose wait was %v returned after %v: ending its queue's statement waited for a connection of the pinned pool", within, took.Round(time.Millisecond))
		}
	})
}

// inQueue reports whether one of l's connections waits for a queue's
// lock.
func (h *harness) inQueue(ctx context.Context, t *testing.T, l *padlock.Locker) bool {
	t.Helper()
	h.mu.Lock()
	app := h.apps[l]
	h.mu.Unlock()
	if h.srv.kind == "mysql" {
		ok, err := h.queued(ctx, app, false) // waiting for the queue lock, not heading the queue
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	return len(h.pids(ctx, t, `SELECT l.pid FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid
		WHERE l.locktype = 'advisory' AND NOT l.granted AND s.application_name = $1`, app)) > 0
}

// On MySQL in advisory mode the queue's head waits on the server for the
// holder's release (mysqlpg's waitReleased: a GET_LOCK on its queue
// connection, which the server wakes at the release) instead of polling
// for it. While a name is held for a second and a half, the one waiter
// behind it tries a handful of times (each wait lasts up to a second),
// and is granted the name at the release; a head that polled (1ms
// doubling to 20ms) tried dozens of times. Counted by the server: the
// writer's try and release run as prepared statements (Com_stmt_execute),
// and nothing else runs meanwhile but the server's own.
func TestMySQLAdvisoryHeadWaitsForRelease(t *testing.T) {
	for _, srv := range servers(t) {
		if srv.kind != "mysql" {
			continue // PostgreSQL's waiters are woken by NOTIFY
		}
		h := newHarness(t, srv, mysqlpg.ModeAdvisory)
		defer h.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		executed := func() int64 {
			var name string
			var n int64
			if err := h.stats.QueryRowContext(ctx, `SHOW GLOBAL STATUS LIKE 'Com_stmt_execute'`).Scan(&name, &n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		a, b := h.open(t, padlock.WithTTL(time.Minute)), h.open(t, padlock.WithTTL(time.Minute))
		conformance.Cycle(ctx, t, b, "warm") // b's statements prepared, its session open
		lk, err := a.Lock(ctx, "held")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *padlock.Lock, 1)
		go func() {
			lk2, err := b.Lock(ctx, "held")
			if err != nil {
				t.Error(err)
			}
			got <- lk2
		}()
		// Hold on until b heads the name's queue and waits on the server
		// (a busy machine may take a while to get it there), then for the
		// scenario's hold: the count below is of what b does while the
		// name is held this long, and it is there from the start.
		h.mu.Lock()
		appB := h.apps[b]
		h.mu.Unlock()
		seen, cancelSeen := context.WithTimeout(ctx, time.Minute)
		defer cancelSeen()
		var lookErr error
		if err := conformance.Poll(seen, 5*time.Millisecond, func() bool {
			ok, err := h.queued(seen, appB, true)
			lookErr = err
			return ok
		}); err != nil {
			t.Fatalf("the waiter was not seen waiting on the server for the release (IS_FREE_LOCK or GET_LOCK on its queue connection) within a minute: its queue's head polls (%v; the last look: %v)", err, lookErr)
		}
		// The count starts here: the look above runs prepared statements
		// too.
		before := executed()
		time.Sleep(1500 * time.Millisecond)
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		lk2 := <-got
		if lk2 == nil {
			t.FailNow()
		}
		tries := executed() - before - 1 // a's release ran prepared too
		if lk2.Token() <= lk.Token() {
			t.Errorf("token %d after the holder's %d", lk2.Token(), lk.Token())
		}
		if err := lk2.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		// A try after each wait of up to a second that ran out, and the
		// granted one.
		t.Logf("the waiter tried %d times while the name was held for 1.5s", tries)
		if tries > 6 {
			t.Errorf("the waiter tried %d times while the name was held for 1.5s, want at most 6: its head polls instead of waiting for the release", tries)
		}
	}
}

// A waiter that heads a name's queue on MySQL and then goes silent (its
// path blackholed, and its client never giving up: a frozen process, or a
// host gone, with no reset) lets the queue go on the server within its
// lease: the server closes its idle queue connection (queue_setup.sql),
// which frees the queue lock, and the next waiter takes the name once its
// holder lets go. Before, the silent head's queue lock
// kept every other client out of the name for MySQL's own wait_timeout,
// 8 hours by default. (Advisory mode, whose head waits on the server in a
// statement the test can see; lease mode's queue is the same code.)
func TestQueueSilentHeadLetsGo(t *testing.T) {
	for _, srv := range servers(t) {
		if srv.kind != "mysql" {
			continue // PostgreSQL's queue connections have idle_session_timeout
		}
		h := newHarness(t, srv, mysqlpg.ModeAdvisory)
		defer h.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		// No request of the test's gives up by itself: the silent head's
		// client never closes its connections (a closed one frees its
		// locks at once), as a frozen process's would not.
		h.extra = url.Values{"request_timeout": {"10m"}}
		holder, head, next := h.open(t), h.open(t), h.open(t)
		const name = "queue/silent-head"
		lk, err := holder.Lock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		h.mu.Lock()
		headApp := h.apps[head]
		h.mu.Unlock()
		hctx, hcancel := context.WithCancel(ctx)
		headDone := make(chan error, 1)
		go func() {
			lk, err := head.Lock(hctx, name)
			if err == nil {
				lk.Unlock(ctx)
			}
			headDone <- err
		}()
		defer func() {
			hcancel()
			<-headDone
		}()
		padlocktest.WaitFor(t, "the head waiting on the server for the holder's release", time.Minute, func() bool {
			n, err := h.blockedOnRow(ctx, headApp, "%IS_FREE_LOCK%")
			return err == nil && n >= 1
		})
		restore, err := h.Blackhole(ctx, head)
		if err != nil {
			t.Fatal(err)
		}
		defer restore()
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		// The head's queue connection is closed by the server after 2s of
		// silence (the lease): a minute is room.
		nctx, ncancel := context.WithTimeout(ctx, time.Minute)
		defer ncancel()
		got, err := next.Lock(nctx, name)
		if err != nil {
			t.Fatalf("the next waiter behind a silent head: %v", err)
		}
		if err := got.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
