package redis_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/driverkit"
	"github.com/padlock-go/padlock/padlocktest"
	"github.com/padlock-go/padlock/redis"
)

// redis.New builds a Locker over the application's own client, and closing
// the Locker leaves that client working.
func TestNewOverExistingClient(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli := goredis.NewClient(&goredis.Options{Addr: single.Nodes()[0].Addr, ContextTimeoutEnabled: true})
	defer cli.Close()
	for _, fair := range []bool{false, true} {
		l, err := redis.New(ctx, cli, redis.Options{Prefix: "existing", Fair: fair}, padlock.WithTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		lk, err := l.Lock(ctx, "n")
		if err != nil {
			t.Fatal(err)
		}
		if n, err := cli.Exists(ctx, "existing:{n}:lock").Result(); err != nil || n != 1 {
			t.Errorf("the hold is not under the given prefix: exists = %d, %v", n, err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if err := cli.Ping(ctx).Err(); err != nil {
			t.Fatalf("the application's client stopped working after Locker.Close: %v", err)
		}
	}
	if _, err := redis.New(ctx, cli, redis.Options{Prefix: "a{b"}); !errors.Is(err, padlock.ErrInvalidOption) {
		t.Errorf("New with a brace in the prefix = %v, want ErrInvalidOption", err)
	}
}

// An uncontended Lock never subscribes (docs/redis.md): it tries first and
// subscribes only when the lock is taken.
func TestUncontendedLockDoesNotSubscribe(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := goredis.NewClient(&goredis.Options{Addr: single.Nodes()[0].Addr})
	defer admin.Close()
	for _, fair := range []bool{false, true} {
		l, err := redis.New(ctx, admin, redis.Options{Prefix: "nosub", Fair: fair})
		if err != nil {
			t.Fatal(err)
		}
		before := commandCalls(t, admin, "subscribe")
		for range 20 {
			conformance.Cycle(ctx, t, l, "n")
		}
		if n := commandCalls(t, admin, "subscribe") - before; n != 0 {
			t.Errorf("fair=%v: 20 uncontended Lock+Unlock sent %d SUBSCRIBEs, want none", fair, n)
		}
		// A contended Lock does subscribe: the count can move.
		lk, _ := l.Lock(ctx, "n")
		res := make(chan error, 1)
		go func() {
			lk2, err := l.Lock(ctx, "n")
			if err == nil {
				err = lk2.Unlock(ctx)
			}
			res <- err
		}()
		padlocktest.WaitFor(t, "a contended Lock subscribing (else the counter cannot see SUBSCRIBEs)", 30*time.Second,
			func() bool { return commandCalls(t, admin, "subscribe") != before })
		lk.Unlock(ctx)
		if err := <-res; err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
}

// In fair mode the release grants the lock to the head of the queue and
// tells it so, with its token: the waiter needs no script call of its own
// after the release (docs/redis.md). Counted on the server: the holder's
// lock and release, and the waiter's two tries (join the queue; try again
// once subscribed), and nothing more.
func TestFairReleaseGrantsTheHead(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr := single.Nodes()[0].Addr
	admin := goredis.NewClient(&goredis.Options{Addr: addr})
	defer admin.Close()
	// A long lease: the waiter refreshes its place only every 10s.
	u := "redis://" + addr + "/?fair=true&prefix=grant&ttl=30s"
	a, b := openURL(t, ctx, u), openURL(t, ctx, u)
	contended := func(name string, measured func(*padlock.Lock, *padlock.Lock)) {
		held, err := a.Lock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		res := make(chan *padlock.Lock, 1)
		go func() {
			lk, err := b.Lock(ctx, name)
			if err != nil {
				t.Error(err)
			}
			res <- lk
		}()
		padlocktest.WaitFor(t, "the waiter in the queue", 30*time.Second, func() bool {
			return admin.ZCard(ctx, "grant:{"+name+"}:queue").Val() == 1
		})
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		next := <-res
		if next == nil {
			t.FailNow()
		}
		measured(held, next)
		if err := next.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	contended("warm-up", func(*padlock.Lock, *padlock.Lock) {}) // loads the scripts
	before := commandCalls(t, admin, "evalsha", "eval")
	contended("n", func(held, next *padlock.Lock) {
		if n := commandCalls(t, admin, "evalsha", "eval") - before; n != 4 {
			t.Errorf("a fair hand-off ran %d scripts, want 4 (lock, join, try once subscribed, release)", n)
		}
		if next.Token() <= held.Token() {
			t.Errorf("token %d after %d", next.Token(), held.Token())
		}
		select {
		case <-next.Done():
			t.Errorf("granted hold lost at once: %v", next.Err())
		default:
		}
	})
}

// All of a Locker's waits share ONE pub/sub connection: with waiters on 10
// names, the server sees one subscribed connection for that client, with 10
// channels, and none left once the waits are over.
func TestOnePubSubConnectionPerLocker(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := newHarness(t, single, "redis", "")
	defer h.Close()
	a, err := h.NewLocker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := h.NewLocker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const n = 10
	var held []*padlock.Lock
	for i := range n {
		lk, err := a.Lock(ctx, fmt.Sprintf("pubsub/%d", i))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, lk)
	}
	res := make(chan error, n)
	for i := range n {
		go func() {
			lk, err := b.Lock(ctx, fmt.Sprintf("pubsub/%d", i))
			if err == nil {
				err = lk.Unlock(ctx)
			}
			res <- err
		}()
	}
	user := h.userOf(b)
	subscribed := func() (conns, channels int) {
		list, err := h.admin[0].ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(list, "\n") {
			if !strings.Contains(line, " user="+user+" ") {
				continue
			}
			for _, f := range strings.Fields(line) {
				if v, ok := strings.CutPrefix(f, "sub="); ok && v != "0" {
					conns++
					fmt.Sscan(v, &channels)
				}
			}
		}
		return conns, channels
	}
	padlocktest.WaitFor(t, "every waiter subscribed on one connection", 30*time.Second, func() bool {
		conns, channels := subscribed()
		if conns > 1 {
			t.Fatalf("%d subscribed connections for one Locker, want 1", conns)
		}
		return conns == 1 && channels == n
	})
	for _, lk := range held {
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		if err := <-res; err != nil {
			t.Fatal(err)
		}
	}
	padlocktest.WaitFor(t, "no channel subscribed once every wait ended", 30*time.Second, func() bool {
		_, channels := subscribed()
		return channels == 0
	})
}

// A non-fair client must not jump fair clients waiting in line: it sees the
// live queue and leaves a free lock to its head. Fair clients B and C queue
// behind A, then non-fair D waits too; A's release must go to B, then C,
// then D.
func TestFairQueueRespectedByNonFairClient(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fair := newHarness(t, single, "redis", "fair=true")
	defer fair.Close()
	plain := newHarness(t, single, "redis", "")
	plain.prefix = fair.prefix // same keys, other mode
	defer plain.Close()
	open := func(h *harness) *padlock.Locker {
		l, err := h.NewLocker(ctx, padlock.WithTTL(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	a, b, c, d := open(fair), open(fair), open(fair), open(plain)
	const name = "mixed"
	lk, err := a.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		order []string
		wg    sync.WaitGroup
	)
	wait := func(who string, l *padlock.Locker) {
		wg.Go(func() {
			lk, err := l.Lock(ctx, name)
			if err != nil {
				t.Errorf("%s: %v", who, err)
				return
			}
			mu.Lock()
			order = append(order, who)
			mu.Unlock()
			lk.Unlock(ctx)
		})
	}
	queued := func(n int) {
		t.Helper()
		// The lock and n queue entries.
		conformance.WaitState(ctx, t, fair, fmt.Sprintf("%d queued waiters", n), 30*time.Second, func(s []string) bool { return len(s) == n+1 })
	}
	wait("B", b)
	queued(1)
	wait("C", c)
	queued(2)
	wait("D", d)
	// D keeps no server state while it waits; its pub/sub subscription
	// (B, C and D each subscribe on their own connection) shows it waits.
	channel := fair.prefix + ":{" + name + "}:wake"
	padlocktest.WaitFor(t, "D subscribing (three subscribers)", 30*time.Second, func() bool {
		n, err := fair.admin[0].PubSubNumSub(ctx, channel).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n[channel] == 3
	})
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := strings.Join(order, ""); got != "BCD" {
		t.Errorf("acquisition order %s, want BCD: the non-fair client jumped the fair queue", got)
	}
}

// A Locker's renewal of many holds on one server sends up to 256 of them
// in one script call (renew_many.lua), not one call per hold, on a single
// server, in fair mode and on each RedLock master, writers, readers and
// permits alike (every hold outlives its TTL several times over, so a
// reader's or permit's lease that the shared call did not extend would
// be lost); and a hold in such a
// call whose key was force-released is still found gone: its Done closes
// with ErrLost, and no other hold is lost. A flushed script cache
// (SCRIPT FLUSH) fails the next shared calls with NOSCRIPT: they run
// again with the script's source, and the holds' leases go on being
// extended, with no renewal failed on the way (the Locker's log says
// none). Counted on the server (a RedLock's first master).
func TestRenewalsShareScriptCalls(t *testing.T) {
	needServers(t)
	const n = 300
	for _, tc := range []struct {
		name, url, prefix string
		server            *padlocktest.Server
	}{
		{"single", "redis://" + single.Addrs() + "/?prefix=renewmany", "renewmany", single},
		{"fair", "redis://" + single.Addrs() + "/?prefix=renewmany-fair&fair=true", "renewmany-fair", single},
		{"redlock", masters3.URL() + "/?prefix=renewmany", "renewmany", masters3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			admin := goredis.NewClient(&goredis.Options{Addr: tc.server.Nodes()[0].Addr})
			defer admin.Close()
			logs := &renewalFailures{}
			l, err := padlock.Open(ctx, tc.url, padlock.WithLogger(slog.New(logs)))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			op, err := padlock.Open(ctx, tc.url)
			if err != nil {
				t.Fatal(err)
			}
			defer op.Close()
			const ttl = 3 * time.Second
			held := make([]*padlock.Lock, n)
			for i := range held {
				held[i] = holdMixed(t, ctx, l, i, ttl)
			}
			// Three renewal periods: one call per hold would be 900.
			before := commandCalls(t, admin, "evalsha", "eval")
			time.Sleep(ttl) // the measurement window
			calls := commandCalls(t, admin, "evalsha", "eval") - before
			t.Logf("%d script calls in %v for %d holds renewed every %v", calls, ttl, n, ttl/3)
			if calls >= n {
				t.Errorf("%d script calls in three renewal periods of %d holds: renewals are not shared", calls, n)
			}
			if _, err := op.ForceUnlock(ctx, "n/123"); err != nil {
				t.Fatal(err)
			}
			select {
			case <-held[123].Done():
			case <-time.After(time.Minute):
				t.Fatal("the force-released hold's Done did not close within a minute")
			}
			if err := held[123].Err(); !errors.Is(err, padlock.ErrLost) {
				t.Errorf("force-released hold: Err() = %v, want ErrLost", err)
			}
			// A renewal of the rest, after the loss.
			after := commandCalls(t, admin, "evalsha", "eval")
			padlocktest.WaitFor(t, "a renewal after the loss", time.Minute, func() bool {
				return commandCalls(t, admin, "evalsha", "eval") > after
			})

			// The script cache flushed: a renewal answered NOSCRIPT loads
			// the script again (EVAL with its source) and still extends
			// the leases.
			evals := commandCalls(t, admin, "eval")
			if err := admin.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			lockKey := tc.prefix + ":{n/200}:lock" // redis/keys.go
			flushed := admin.PTTL(ctx, lockKey).Val()
			padlocktest.WaitFor(t, "a lease extended after SCRIPT FLUSH", time.Minute, func() bool {
				return commandCalls(t, admin, "eval") > evals && admin.PTTL(ctx, lockKey).Val() > flushed
			})
			for i, lk := range held {
				if i == 123 {
					continue
				}
				select {
				case <-lk.Done():
					t.Fatalf("hold %d lost: %v", i, lk.Err())
				default:
				}
				if err := lk.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if n := logs.count.Load(); n > 0 {
				t.Errorf("%d renewals failed (the Locker logged them): a renewal call's answer was not read as it should be", n)
			}
		})
	}
}

// holdMixed takes the name "n/<i>" on l with ttl, the i-th of a set whose
// renewals are shared: a reader where i ends in 1, a permit of 3 where it
// ends in 2, a writer otherwise.
func holdMixed(t *testing.T, ctx context.Context, l *padlock.Locker, i int, ttl time.Duration) *padlock.Lock {
	t.Helper()
	name := fmt.Sprintf("n/%03d", i)
	var lk *padlock.Lock
	var err error
	switch i % 10 {
	case 1:
		lk, err = l.RLock(ctx, name, padlock.WithTTL(ttl))
	case 2:
		lk, err = l.Lock(ctx, name, padlock.WithTTL(ttl), padlock.WithLimit(3))
	default:
		lk, err = l.Lock(ctx, name, padlock.WithTTL(ttl))
	}
	if err != nil {
		t.Fatal(err)
	}
	return lk
}

// renewalFailures is a log handler that counts a Locker's failed renewals
// (its debug records "renewal failed"); it keeps nothing else.
type renewalFailures struct{ count atomic.Int64 }

func (r *renewalFailures) Enabled(context.Context, slog.Level) bool { return true }
func (r *renewalFailures) Handle(_ context.Context, rec slog.Record) error {
	if strings.Contains(rec.Message, "renewal failed") || strings.Contains(rec.Message, "renewals keep failing") {
		r.count.Add(1)
	}
	return nil
}
func (r *renewalFailures) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *renewalFailures) WithGroup(string) slog.Handler      { return r }

// On a Redis Cluster a Locker's renewals go to each master together
// (renewAnySlotScript: one call takes the keys of names on many slots), not
// one call per hold; and a hold whose slot moved to another master since
// the client read the slot map (the master answers MOVED) is still renewed
// (readers and permits among the holds, whose leases a grouped call that
// did not extend them would lose),
// through the cluster client, which learns the new map: no hold is lost,
// the moved one's lease keeps being extended on its new master, and the
// renewals after the move are grouped again, as they are after every
// master's script cache is flushed. Counted on the masters.
func TestClusterRenewalsGroupedByMaster(t *testing.T) {
	needServers(t)
	const n, ttl = 300, 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admins := map[string]*goredis.Client{} // by node id
	for _, node := range cluster.Nodes() {
		c := goredis.NewClient(&goredis.Options{Addr: node.Addr})
		defer c.Close()
		id, err := c.ClusterMyID(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		admins[id] = c
	}
	scripts := func() int {
		calls := 0
		for _, c := range admins {
			calls += commandCalls(t, c, "evalsha", "eval")
		}
		return calls
	}
	l := openURL(t, ctx, cluster.URL()+"/?prefix=renew-cluster")
	held := make([]*padlock.Lock, n)
	for i := range held {
		held[i] = holdMixed(t, ctx, l, i, ttl)
	}
	// Three renewal periods: one call per hold would be 900.
	grouped := func(when string) {
		t.Helper()
		before := scripts()
		time.Sleep(ttl) // the measurement window
		calls := scripts() - before
		t.Logf("%s: %d script calls in %v for %d holds renewed every %v", when, calls, ttl, n, ttl/3)
		if calls >= n {
			t.Errorf("%s: %d script calls in three renewal periods of %d holds: renewals are not grouped by master", when, calls, n)
		}
	}
	grouped("before the move")

	// Move the slot of n/123 (its hash tag is its name) to another master,
	// keys and all, as a resharding would.
	slot := int64(driverkit.ClusterSlot("n/123"))
	var srcID, dstID string
	slots, err := admins[firstKey(admins)].ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slots {
		if int64(s.Start) <= slot && slot <= int64(s.End) {
			srcID = s.Nodes[0].ID
		}
	}
	for id := range admins {
		if id != srcID {
			dstID = id
			break
		}
	}
	src, dst := admins[srcID], admins[dstID]
	if src == nil || dst == nil {
		t.Fatalf("slot %d: owner %q not among the masters %v", slot, srcID, admins)
	}
	host, port, _ := strings.Cut(dst.Options().Addr, ":")
	for _, step := range []func() error{
		func() error { return dst.Do(ctx, "cluster", "setslot", slot, "importing", srcID).Err() },
		func() error { return src.Do(ctx, "cluster", "setslot", slot, "migrating", dstID).Err() },
		func() error {
			keys, err := src.ClusterGetKeysInSlot(ctx, int(slot), 1000).Result()
			if err != nil || len(keys) == 0 {
				return fmt.Errorf("keys of slot %d: %v, %v", slot, keys, err)
			}
			args := []any{"migrate", host, port, "", 0, 5000, "keys"}
			for _, k := range keys {
				args = append(args, k)
			}
			return src.Do(ctx, args...).Err()
		},
		func() error {
			for _, c := range admins {
				if err := c.Do(ctx, "cluster", "setslot", slot, "node", dstID).Err(); err != nil {
					return err
				}
			}
			return nil
		},
	} {
		if err := step(); err != nil {
			t.Fatalf("moving slot %d from %s to %s: %v", slot, srcID, dstID, err)
		}
	}
	const lockKey = "renew-cluster:{n/123}:lock" // redis/keys.go
	if v, err := dst.Get(ctx, lockKey).Result(); err != nil || v == "" {
		t.Fatalf("%s on its new master: %q, %v", lockKey, v, err)
	}
	// Renewed on its new master: its lease, read now, is extended again.
	first := dst.PTTL(ctx, lockKey).Val()
	padlocktest.WaitFor(t, "the moved hold's lease extended on its new master", time.Minute, func() bool {
		return dst.PTTL(ctx, lockKey).Val() > first
	})
	grouped("after the move")
	// Every master's script cache flushed: a grouped call answered
	// NOSCRIPT runs again with the script's source on its master, still
	// grouped (were it to fail, its holds would go one call each through
	// the cluster client, n calls in the window).
	for _, c := range admins {
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	grouped("after SCRIPT FLUSH")
	for i, lk := range held {
		select {
		case <-lk.Done():
			t.Fatalf("hold %d lost: %v", i, lk.Err())
		default:
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatalf("unlock %d: %v", i, err)
		}
	}
}

// firstKey is any key of m.
func firstKey[V any](m map[string]V) string {
	for k := range m {
		return k
	}
	return ""
}

// A LockAll whose one script fails with an unknown outcome (the path
// silent) gives back every name in the background, and waits for the
// first attempts at most a second in all: it waited a second per name.
func TestLockAllCleanupInAnOutageWaitsOnce(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h := newHarness(t, single, "redis", "")
	t.Cleanup(func() { h.Close() })
	l := conformance.NewLocker(ctx, t, h, padlock.WithTTL(20*time.Second))
	names := make([]string, 30)
	for i := range names {
		names[i] = fmt.Sprintf("outage-%02d", i)
	}
	warm, err := l.LockAll(ctx, names) // loads the script
	if err != nil {
		t.Fatal(err)
	}
	if err := padlock.UnlockAll(ctx, warm); err != nil {
		t.Fatal(err)
	}
	restore, err := h.Blackhole(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	locks, err := l.LockAll(ctx, names)
	took := time.Since(start)
	if err == nil || locks != nil {
		t.Fatalf("LockAll on a silent path = %v, %v; want an error", locks, err)
	}
	t.Logf("LockAll of %d names on a silent path: %v", len(names), took.Round(time.Millisecond))
	// One request timeout (5s) and one clean-up wait (1s), with room for a
	// busy machine; a wait per name takes 30s more.
	if took > 20*time.Second {
		t.Errorf("LockAll of %d names on a silent path returned after %v: its clean-up waited name by name", len(names), took.Round(time.Millisecond))
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	padlocktest.WaitFor(t, "nothing of the call left", time.Minute, func() bool {
		s, err := h.State(ctx)
		return err == nil && len(s) == 0
	})
}
