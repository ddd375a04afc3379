package redis_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
	"github.com/padlock-go/padlock/padlocktest"
)

// Readers and permits: what the conformance suite cannot see from the
// portable API (docs/redis.md, "Readers and permits").

// loadScript returns one of the driver's scripts as the driver runs it:
// with lib.lua's helpers at its line "-- lib.lua" where it uses them.
func loadScript(t *testing.T, name string, lib bool) *goredis.Script {
	t.Helper()
	src, err := os.ReadFile("../../redis/scripts/" + name)
	if err != nil {
		t.Fatal(err)
	}
	if lib {
		l, err := os.ReadFile("../../redis/scripts/lib.lua")
		if err != nil {
			t.Fatal(err)
		}
		src = []byte(strings.Replace(string(src), "\n-- lib.lua\n", "\n"+string(l), 1))
	}
	return goredis.NewScript(string(src))
}

// scriptKeys are a name's keys in the order of acquire.lua's header.
func scriptKeys(prefix, name string) []string {
	base := prefix + ":{" + name + "}:"
	return []string{base + "lock", base + "fence", base + "queue", base + "deadlines", base + "holds", base + "tokens", base + "waiters", base + "reserved"}
}

// A Share whose answer was lost is run again: the second run finds the
// hold a reader already and says so; Renew and Release work on the hold
// in either state, and a release that comes twice is refused the second
// time.
func TestShareRetried(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := goredis.NewClient(&goredis.Options{Addr: single.Nodes()[0].Addr})
	defer rdb.Close()
	k := scriptKeys("share", "n")
	defer rdb.Del(ctx, k...)
	lock, holds := k[0], k[4]
	acquire, share := loadScript(t, "acquire.lua", false), loadScript(t, "share.lua", true)
	renew, release := loadScript(t, "renew.lua", false), loadScript(t, "release.lua", true)
	run := func(s *goredis.Script, keys []string, args ...any) int64 {
		t.Helper()
		v, err := s.Run(ctx, rdb, keys, args...).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	w, err := acquire.Run(ctx, rdb, k, "w", 60000).Int64Slice()
	if err != nil || w[0] != 1 {
		t.Fatalf("writer: %v %v", w, err)
	}
	renewKeys := []string{lock, holds, k[5]}
	releaseKeys := []string{lock, k[2], k[3], k[1], holds, k[5], k[6], k[7]}
	for i := range 2 { // the second run is the retry of a lost answer
		if n := run(share, k, "w", 60000, w[1], "share:{n}:wake"); n != 1 {
			t.Fatalf("share run %d = %d, want 1 (a reader now)", i+1, n)
		}
	}
	if rdb.Exists(ctx, lock).Val() != 0 {
		t.Error("the writer's lock key is still there after Share")
	}
	if tok := rdb.ZScore(ctx, k[5], "w").Val(); int64(tok) != w[1] {
		t.Errorf("the reader's token is %v, want the writer's %d", tok, w[1])
	}
	if n := run(renew, renewKeys, "w", 60000); n != 1 {
		t.Errorf("renew of the shared hold = %d, want 1", n)
	}
	// Another reader may come in beside it; a writer may not.
	shared := loadScript(t, "acquire_shared.lua", true)
	r, err := shared.Run(ctx, rdb, k, "r/S", 60000, "0", 0, "S", 1, "share:{n}:wake").Int64Slice()
	if err != nil || r[0] != 1 || r[1] <= w[1] {
		t.Fatalf("a reader beside the downgraded writer: %v %v, want granted with a token above %d", r, err, w[1])
	}
	if v, err := acquire.Run(ctx, rdb, k, "w2", 60000).Int64Slice(); err != nil || v[0] != 0 {
		t.Fatalf("a writer beside two readers: %v %v, want refused", v, err)
	}
	if n := run(release, releaseKeys, "w", "share:{n}:wake"); n != 1 {
		t.Errorf("release of the shared hold = %d, want 1", n)
	}
	if n := run(release, releaseKeys, "w", "share:{n}:wake"); n != 0 {
		t.Errorf("second release = %d, want 0 (already gone)", n)
	}
	if n := run(renew, renewKeys, "w", 60000); n != 0 {
		t.Errorf("renew after release = %d, want 0", n)
	}
	if n := run(share, k, "w", 60000, w[1], "share:{n}:wake"); n != 0 {
		t.Errorf("share after release = %d, want 0 (gone)", n)
	}
	if n := run(release, releaseKeys, "r/S", "share:{n}:wake"); n != 1 {
		t.Errorf("release of the other reader = %d, want 1", n)
	}
	if left := rdb.Exists(ctx, lock, holds, k[5]).Val(); left != 0 {
		t.Errorf("%d of lock, holds, tokens left after every hold was released", left)
	}
}

// A reader and a permit whose client died right after their script ran
// (the answer never arrived) keep the name only for their lease: a writer
// that waits gets it then, with a greater token, and nothing is left.
func TestCrashedReaderAndPermitExpire(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := goredis.NewClient(&goredis.Options{Addr: single.Nodes()[0].Addr})
	defer rdb.Close()
	shared := loadScript(t, "acquire_shared.lua", true)
	l := openURL(t, ctx, "redis://"+single.Nodes()[0].Addr+"/?prefix=crash&ttl=2s")
	const lease = 500 // ms
	for _, c := range []struct {
		name, id, mode string
		limit          int
	}{{"reader", "dead|1/S", "S", 1}, {"permit", "dead|2/X2", "X", 2}} {
		k := scriptKeys("crash", c.name)
		v, err := shared.Run(ctx, rdb, k, c.id, lease, "0", 0, c.mode, c.limit, "crash:{"+c.name+"}:wake").Int64Slice()
		if err != nil || v[0] != 1 {
			t.Fatalf("%s: %v %v", c.name, v, err)
		}
		if pttl := rdb.PTTL(ctx, k[4]).Val(); pttl <= 0 || pttl > lease*time.Millisecond {
			t.Errorf("%s: holds key expires in %v, want within the lease", c.name, pttl)
		}
		if c.mode == "X" {
			// A writer on a semaphore's name is another limit, at once.
			if _, err := l.TryLock(ctx, c.name); !errors.Is(err, padlock.ErrInvalidOption) {
				t.Fatalf("%s: TryLock = %v, want ErrInvalidOption", c.name, err)
			}
			lk, err := l.Lock(ctx, c.name, padlock.WithLimit(2), padlock.WithWait(30*time.Second))
			if err != nil {
				t.Fatalf("%s: the other permit: %v", c.name, err)
			}
			if lk.Token() <= uint64(v[1]) {
				t.Errorf("%s: token %d after the dead permit's %d", c.name, lk.Token(), v[1])
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			padlocktest.WaitFor(t, "the dead permit's lease to run out", 30*time.Second, func() bool {
				return rdb.Exists(ctx, k[4]).Val() == 0
			})
		} else {
			start := time.Now()
			lk, err := l.Lock(ctx, c.name, padlock.WithWait(30*time.Second))
			if err != nil {
				t.Fatalf("%s: writer after a dead reader: %v", c.name, err)
			}
			if took := time.Since(start); took < lease*time.Millisecond/2 {
				t.Errorf("%s: writer granted after %v, while the dead reader's lease ran", c.name, took)
			}
			if lk.Token() <= uint64(v[1]) {
				t.Errorf("%s: writer's token %d after the dead reader's %d", c.name, lk.Token(), v[1])
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if left := rdb.Exists(ctx, k[0], k[2], k[3], k[4], k[5]).Val(); left != 0 {
			t.Errorf("%s: %d keys left besides the fencing counter", c.name, left)
		}
		rdb.Del(ctx, k[1])
	}
}

// In fair mode a permit of another limit is refused even when only a
// waiter on the name has that limit (no hold does), and leaves nothing.
func TestLimitMismatchAgainstWaiterOnly(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := goredis.NewClient(&goredis.Options{Addr: single.Nodes()[0].Addr})
	defer rdb.Close()
	k := scriptKeys("waitonly", "n")
	defer rdb.Del(ctx, k...)
	// A permit of 3 waiting in line, as fair_acquire.lua queues one,
	// with a place deadline a minute ahead.
	const waiter = `{"host":"elsewhere"}|0123/X3.60000`
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	rdb.ZAdd(ctx, k[2], goredis.Z{Score: 1, Member: waiter})
	rdb.ZAdd(ctx, k[3], goredis.Z{Score: float64(now.Add(time.Minute).UnixMilli()), Member: waiter})
	rdb.PExpire(ctx, k[2], time.Minute)
	rdb.PExpire(ctx, k[3], time.Minute)
	l := openURL(t, ctx, "redis://"+single.Nodes()[0].Addr+"/?prefix=waitonly&fair=true")
	for _, c := range []struct {
		what  string
		try   func() (*padlock.Lock, error)
		asked string
	}{
		{"TryLock with limit 2", func() (*padlock.Lock, error) { return l.TryLock(ctx, "n", padlock.WithLimit(2)) }, "2"},
		{"Lock with limit 4", func() (*padlock.Lock, error) {
			return l.Lock(ctx, "n", padlock.WithLimit(4), padlock.WithWait(time.Minute))
		}, "4"},
		{"a plain Lock", func() (*padlock.Lock, error) { return l.Lock(ctx, "n", padlock.WithWait(time.Minute)) }, "1"},
		{"RLock", func() (*padlock.Lock, error) { return l.RLock(ctx, "n", padlock.WithWait(time.Minute)) }, "1"},
	} {
		start := time.Now()
		lk, err := c.try()
		if lk != nil {
			lk.Unlock(ctx)
		}
		if !errors.Is(err, padlock.ErrInvalidOption) || !strings.Contains(err.Error(), "limit 3") ||
			!strings.Contains(err.Error(), "limit "+c.asked) {
			t.Errorf("%s beside a waiting permit of 3 = %v, want ErrInvalidOption naming limits 3 and %s", c.what, err, c.asked)
		}
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("%s: refused after %v, want at once", c.what, took)
		}
		if q := rdb.ZRange(ctx, k[2], 0, -1).Val(); len(q) != 1 || q[0] != waiter {
			t.Fatalf("%s left the queue as %q, want only the waiting permit", c.what, q)
		}
		if n := rdb.Exists(ctx, k[0], k[4], k[5]).Val(); n != 0 {
			t.Fatalf("%s left %d keys of holds", c.what, n)
		}
	}
}

// Holders lists each reader and each permit with its mode and limit, and
// ForceUnlock takes every one of them away, recording each.
func TestHoldersAndForceUnlockOfSharedHolds(t *testing.T) {
	needServers(t)
	for _, c := range []struct{ name, url string }{
		{"single", "redis://" + single.Nodes()[0].Addr + "/?prefix=insp1"},
		{"fair", "redis://" + single.Nodes()[0].Addr + "/?prefix=insp2&fair=true"},
		{"redlock", "redlock://" + masters3.Addrs() + "/?prefix=insp3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			a, b, op := openURL(t, ctx, c.url+"&ttl=2s"), openURL(t, ctx, c.url+"&ttl=2s"), openURL(t, ctx, c.url)
			type group struct {
				name  string
				take  func(*padlock.Locker) (*padlock.Lock, error)
				mode  backends.Mode
				limit int
			}
			for _, g := range []group{
				{"rw", func(l *padlock.Locker) (*padlock.Lock, error) { return l.RLock(ctx, "rw") }, backends.Shared, 1},
				{"sem", func(l *padlock.Locker) (*padlock.Lock, error) {
					return l.Lock(ctx, "sem", padlock.WithLimit(3))
				}, backends.Exclusive, 3},
			} {
				var held []*padlock.Lock
				for _, l := range []*padlock.Locker{a, b} {
					lk, err := g.take(l)
					if err != nil {
						t.Fatalf("%s: %v", g.name, err)
					}
					held = append(held, lk)
				}
				hs, err := op.Holders(ctx, g.name)
				if err != nil {
					t.Fatal(err)
				}
				if len(hs) != 2 {
					t.Fatalf("%s: Holders = %+v, want one entry per hold (2)", g.name, hs)
				}
				for i, h := range hs {
					if h.Mode != g.mode || h.Limit != g.limit || h.Token != held[i].Token() {
						t.Errorf("%s: holder %d = mode %v limit %d token %d, want %v, %d, %d",
							g.name, i, h.Mode, h.Limit, h.Token, g.mode, g.limit, held[i].Token())
					}
					if time.Until(h.Expires) <= 0 {
						t.Errorf("%s: holder %d expires %v, want ahead", g.name, i, h.Expires)
					}
				}
				if _, err := op.ForceUnlock(ctx, g.name); err != nil {
					t.Fatalf("%s: ForceUnlock: %v", g.name, err)
				}
				for i, lk := range held {
					select {
					case <-lk.Done():
						if !errors.Is(lk.Err(), padlock.ErrLost) {
							t.Errorf("%s: hold %d ended with %v, want ErrLost", g.name, i, lk.Err())
						}
					case <-time.After(30 * time.Second):
						t.Fatalf("%s: hold %d still believes it holds after ForceUnlock", g.name, i)
					}
				}
				if hs, err := op.Holders(ctx, g.name); err != nil || len(hs) != 0 {
					t.Errorf("%s: Holders after ForceUnlock = %+v, %v", g.name, hs, err)
				}
				fs, err := op.ForcedReleases(ctx, g.name)
				if err != nil {
					t.Fatal(err)
				}
				if len(fs) != 2 {
					t.Errorf("%s: ForcedReleases = %+v, want a record of each hold (2)", g.name, fs)
				}
				lk, err := g.take(a)
				if err != nil {
					t.Fatalf("%s: after ForceUnlock: %v", g.name, err)
				}
				if err := lk.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// In fair mode a release hands the name to every reader at the head of
// the line up to the first writer, at once; a reader behind that writer
// waits for it.
func TestFairHandOffToReaders(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr := single.Nodes()[0].Addr
	admin := goredis.NewClient(&goredis.Options{Addr: addr})
	defer admin.Close()
	u := "redis://" + addr + "/?fair=true&prefix=handoff&ttl=30s"
	l := openURL(t, ctx, u)
	w1, err := l.Lock(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		who string
		lk  *padlock.Lock
	}
	granted := make(chan result, 4)
	queue := "handoff:{n}:queue"
	for i, who := range []string{"reader 1", "reader 2", "writer 2", "reader 3"} {
		go func() {
			var lk *padlock.Lock
			var err error
			if strings.HasPrefix(who, "writer") {
				lk, err = openURL(t, ctx, u).Lock(ctx, "n")
			} else {
				lk, err = openURL(t, ctx, u).RLock(ctx, "n")
			}
			if err != nil {
				t.Error(who, err)
			}
			granted <- result{who, lk}
		}()
		padlocktest.WaitFor(t, who+" in the line", 30*time.Second, func() bool {
			return admin.ZCard(ctx, queue).Val() == int64(i+1)
		})
	}
	if err := w1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The release's own script granted them: no waiter had to ask.
	if n := admin.ZCard(ctx, "handoff:{n}:holds").Val(); n != 2 {
		t.Errorf("%d readers hold right after the writer's release, want 2", n)
	}
	next := func() result {
		t.Helper()
		select {
		case r := <-granted:
			if r.lk == nil {
				t.FailNow()
			}
			return r
		case <-time.After(30 * time.Second):
			t.Fatal("nobody granted")
		}
		return result{}
	}
	r1, r2 := next(), next()
	if r1.who+r2.who != "reader 1reader 2" && r1.who+r2.who != "reader 2reader 1" {
		t.Fatalf("granted %s and %s first, want readers 1 and 2", r1.who, r2.who)
	}
	if q := admin.ZCard(ctx, queue).Val(); q != 2 {
		t.Errorf("%d left in line after the hand-off, want the writer and the reader behind it", q)
	}
	select {
	case r := <-granted:
		t.Fatalf("%s granted beside readers 1 and 2", r.who)
	default:
	}
	for _, r := range []result{r1, r2} {
		if err := r.lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if w := next(); w.who != "writer 2" {
		t.Fatalf("granted %s after the readers, want writer 2", w.who)
	} else if err := w.lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if r := next(); r.who != "reader 3" {
		t.Fatalf("granted %s last, want reader 3", r.who)
	} else if err := r.lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// RedLock permits need the stronger quorum q = ⌊N·n/(n+1)⌋ + 1 (docs/redis.md):
// with 5 masters, a permit of 2 needs 4. With 2 masters down, readers and
// writers still have a majority (3) and permits do not.
func TestRedLockPermitQuorum(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	restartStopped(t, masters5)
	l := openURL(t, ctx, "redlock://"+masters5.Addrs()+"/?prefix=pq&ttl=2s")
	lk, err := l.TryLock(ctx, "sem", padlock.WithLimit(2))
	if err != nil {
		t.Fatalf("a permit on 5 masters: %v", err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	masters5.Nodes()[3].Kill()
	masters5.Nodes()[4].Kill()
	for _, c := range []struct {
		what string
		try  func() (*padlock.Lock, error)
	}{
		{"a writer", func() (*padlock.Lock, error) { return l.TryLock(ctx, "rw") }},
		{"a reader", func() (*padlock.Lock, error) { return l.TryRLock(ctx, "rw") }},
	} {
		lk, err := c.try()
		if err != nil {
			t.Fatalf("%s on 3 of 5 masters (a majority): %v", c.what, err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	lk, err = l.TryLock(ctx, "sem", padlock.WithLimit(2))
	if err == nil {
		lk.Unlock(ctx)
	}
	if !errors.Is(err, padlock.ErrUnavailable) || !strings.Contains(err.Error(), "quorum is 4") {
		t.Fatalf("a permit of 2 on 3 of 5 masters = %v, want ErrUnavailable naming a quorum of 4", err)
	}
}

// LockAll of five free names on one Redis is one script (acquire_all.lua),
// not five: counted on the server, with each name's own SET and INCR
// inside it (docs/multilock.md).
func TestLockAllOneRequest(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr := single.Nodes()[0].Addr
	admin := goredis.NewClient(&goredis.Options{Addr: addr})
	defer admin.Close()
	l := openURL(t, ctx, "redis://"+addr+"/?prefix=lockall-once")
	names := []string{"e", "a", "d", "b", "c"}
	cycle := func() []*padlock.Lock {
		t.Helper()
		locks, err := l.LockAll(ctx, names)
		if err != nil {
			t.Fatal(err)
		}
		return locks
	}
	padlock.UnlockAll(ctx, cycle()) // loads the script
	scripts, sets := commandCalls(t, admin, "evalsha", "eval"), commandCalls(t, admin, "set")
	locks := cycle()
	if n := commandCalls(t, admin, "evalsha", "eval") - scripts; n != 1 {
		t.Errorf("LockAll of %d free names ran %d scripts, want 1", len(names), n)
	}
	if n := commandCalls(t, admin, "set") - sets; n != len(names) {
		t.Errorf("LockAll of %d free names ran %d SETs, want one per name", len(names), n)
	}
	for i, lk := range locks {
		if lk.Name() != names[i] {
			t.Errorf("handle %d is %q, want %q", i, lk.Name(), names[i])
		}
		if got := admin.Get(ctx, "lockall-once:{"+names[i]+"}:fence").Val(); got != strconv.FormatUint(lk.Token(), 10) {
			t.Errorf("%q: token %d, fencing counter %s", names[i], lk.Token(), got)
		}
	}
	if err := padlock.UnlockAll(ctx, locks); err != nil {
		t.Fatal(err)
	}
}

// acquire_all.lua takes all or none: with one name held, or kept a
// moment for a waiter that waited too long (a release's reservation, which
// every other writer's try honours), it writes nothing (no lock key, no
// counter); a retry of a run whose answer was lost is answered with that
// run's tokens; a retry that finds only some of its ids (the others
// expired and were taken since) gives those back.
func TestAcquireAllScript(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := goredis.NewClient(&goredis.Options{Addr: single.Nodes()[0].Addr})
	defer rdb.Close()
	script := loadScript(t, "acquire_all.lua", false)
	var keys, all []string
	var args []any
	for _, n := range []string{"x", "y", "z"} {
		k := scriptKeys("allscript", n)
		keys = append(keys, k[0], k[1], k[2], k[4], k[7])
		all = append(all, k...)
	}
	defer rdb.Del(ctx, all...)
	args = append(args, 60000, "id-x", "id-y", "id-z", "allscript:{x}:wake", "allscript:{y}:wake", "allscript:{z}:wake")
	run := func() []int64 {
		t.Helper()
		res, err := script.Run(ctx, rdb, keys, args...).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	lockX, fenceX, lockY, lockZ, reservedZ := keys[0], keys[1], keys[5], keys[10], keys[14]
	rdb.Set(ctx, lockZ, "other", time.Minute)
	if res := run(); len(res) != 1 || res[0] != 0 {
		t.Fatalf("with z held: %v, want {0}", res)
	}
	if n := rdb.Exists(ctx, lockX, fenceX, lockY).Val(); n != 0 {
		t.Fatalf("with z held the script left %d keys of x and y", n)
	}
	rdb.Del(ctx, lockZ)
	rdb.Set(ctx, reservedZ, "a waiter", time.Minute)
	if res := run(); len(res) != 1 || res[0] != 0 {
		t.Fatalf("with z kept for a waiter: %v, want {0}", res)
	}
	if n := rdb.Exists(ctx, lockX, fenceX, lockY, lockZ).Val(); n != 0 {
		t.Fatalf("with z kept for a waiter the script left %d keys", n)
	}
	rdb.Del(ctx, reservedZ)
	first := run()
	if len(first) != 4 || first[0] != 1 {
		t.Fatalf("over free names: %v, want {1, three tokens}", first)
	}
	if again := run(); !slices.Equal(again, first) {
		t.Errorf("the retry of a granted run: %v, want %v", again, first)
	}
	rdb.Set(ctx, lockY, "other", time.Minute) // y expired and was taken since
	if res := run(); len(res) != 1 || res[0] != 0 {
		t.Fatalf("a retry that finds y taken: %v, want {0}", res)
	}
	if n := rdb.Exists(ctx, lockX, lockZ).Val(); n != 0 {
		t.Errorf("a retry that found y taken left %d of its own keys", n)
	}
	if v := rdb.Get(ctx, lockY).Val(); v != "other" {
		t.Errorf("y's holder is %q, want other", v)
	}
}

// On a Redis Cluster LockAll is one script when every name's keys are on
// one slot, and name by name otherwise (one script reaches one slot).
func TestLockAllOneRequestCluster(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var admins []*goredis.Client
	for _, n := range cluster.Nodes() {
		c := goredis.NewClient(&goredis.Options{Addr: n.Addr})
		defer c.Close()
		admins = append(admins, c)
	}
	scripts := func() int {
		n := 0
		for _, c := range admins {
			n += commandCalls(t, c, "evalsha", "eval")
		}
		return n
	}
	// Names on one slot, found by the cluster's own hash (CRC16 of the
	// hash tag, which is the name), confirmed by the server.
	same := []string{"slot/0"}
	want := driverkit.ClusterSlot(same[0])
	for i := 1; len(same) < 3 && i < 1_000_000; i++ {
		if n := "slot/" + strconv.Itoa(i); driverkit.ClusterSlot(n) == want {
			same = append(same, n)
		}
	}
	for _, n := range same {
		if got := admins[0].ClusterKeySlot(ctx, n).Val(); got != int64(want) {
			t.Fatalf("CLUSTER KEYSLOT %q = %d, driverkit.ClusterSlot says %d", n, got, want)
		}
	}
	l := openURL(t, ctx, cluster.URL()+"/?prefix=lockall-cluster")
	for _, c := range []struct {
		names []string
		want  int
	}{
		{same, 1},
		{[]string{"slot/0", "slot/1", "slot/2"}, 3}, // three slots: name by name
	} {
		padlock.UnlockAll(ctx, mustLockAll(t, ctx, l, c.names)) // loads the scripts
		before := scripts()
		locks := mustLockAll(t, ctx, l, c.names)
		if n := scripts() - before; n != c.want {
			t.Errorf("LockAll(%q) on a cluster ran %d scripts, want %d", c.names, n, c.want)
		}
		if err := padlock.UnlockAll(ctx, locks); err != nil {
			t.Fatal(err)
		}
	}
}

func mustLockAll(t *testing.T, ctx context.Context, l *padlock.Locker, names []string) []*padlock.Lock {
	t.Helper()
	locks, err := l.LockAll(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	return locks
}

// BenchmarkLockAll compares LockAll of four free names (one script) with
// the per-name path it replaces (four Locks in byte order), each followed
// by its four Unlocks. Compare the two ns/op: a ratio, not a docs number.
func BenchmarkLockAll(b *testing.B) {
	ctx := context.Background()
	l, err := padlock.Open(ctx, "redis://"+single.Nodes()[0].Addr+"/?prefix=bench-lockall")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	names := []string{"a", "b", "c", "d"}
	b.Run("one-request", func(b *testing.B) {
		for b.Loop() {
			locks, err := l.LockAll(ctx, names)
			if err != nil {
				b.Fatal(err)
			}
			if err := padlock.UnlockAll(ctx, locks); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("per-name", func(b *testing.B) {
		locks := make([]*padlock.Lock, len(names))
		for b.Loop() {
			for i, n := range names {
				lk, err := l.Lock(ctx, n)
				if err != nil {
					b.Fatal(err)
				}
				locks[i] = lk
			}
			if err := padlock.UnlockAll(ctx, locks); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// One RedLock master down leaves no background task behind an
// acquisition. A try whose dial was refused never joined that master's
// waiters: a plain Lock starts no clean-up at all (each used to leave a
// task that asked every master again, waking their waiters, until the
// master came back). A master that takes the request and never answers
// may have run it: the clean-up asks it again, but ends once what it
// would remove has expired, a TTL on.
func TestRedLockDeadMasterLeavesNoTasks(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	restartStopped(t, masters5)
	cycles := func(l *padlock.Locker, n int) {
		t.Helper()
		for range n {
			lk, err := l.Lock(ctx, "n")
			if err != nil {
				t.Fatal(err)
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	const n = 100
	t.Run("refused", func(t *testing.T) {
		// A lease of 30s: a task left behind would outlive the cycles.
		l := openURL(t, ctx, "redlock://"+masters5.Addrs()+"/?prefix=deadmaster&ttl=30s")
		masters5.Nodes()[4].Kill()
		cycles(l, 1) // the pools settle on the dead master
		base := runtime.NumGoroutine()
		cycles(l, n)
		if got := runtime.NumGoroutine(); got >= base+n/4 {
			t.Fatalf("%d goroutines after %d Lock/Unlock cycles with a master down, %d before: each left a clean-up behind", got, n, base)
		}
	})
	t.Run("silent", func(t *testing.T) {
		if err := startStopped(ctx, masters5); err != nil {
			t.Fatal(err)
		}
		nodes := masters5.Nodes()
		p, err := padlocktest.NewProxy(nodes[4].Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		addrs := make([]string, len(nodes))
		for i, nd := range nodes {
			addrs[i] = nd.Addr
		}
		addrs[4] = p.Addr()
		l := openURL(t, ctx, "redlock://"+strings.Join(addrs, ",")+"/?prefix=silentmaster&ttl=2s")
		cycles(l, 1)
		restore, err := p.Blackhole(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer restore()
		base := runtime.NumGoroutine()
		cycles(l, 20)
		// The clean-ups end a TTL (2s) on, at their next attempt (a
		// back-off of at most 5s): the bound is generous. Without the
		// TTL's end they would ask the silent master until it answered.
		padlocktest.WaitFor(t, "the clean-ups of the silent master's tries ended", 45*time.Second, func() bool {
			return runtime.NumGoroutine() < base+5
		})
	})
}
