package redis_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/padlocktest"
)

// Outside fair mode a release wakes one waiter, the first to arrive, not
// every waiter: B, C and D wait for A's lock in that order (each seen
// among the name's waiters before the next asks), and each release hands
// the name to the next of them. Counted on the server: the script calls
// from A's release to D's are one release and one granted try per hand-off
// (7 in all); a release that woke every waiter would add a refused try by
// each waiter still in line (3 more at least). On one server and on a
// Cluster; on RedLock's 3 masters the order is checked, not the count (a
// woken waiter may try a master before the release there has run, and
// then tries that master once more, or leaves its waiters, afterwards).
func TestNonFairReleaseWakesOne(t *testing.T) {
	needServers(t)
	for _, c := range []struct {
		name, scheme string
		g            func() *padlocktest.Server
		copies       int  // servers that run each script
		counted      bool // whether the script calls of the hand-offs are exact
	}{
		{"single", "redis", func() *padlocktest.Server { return single }, 1, true},
		{"cluster", "redis+cluster", func() *padlocktest.Server { return cluster }, 1, true},
		{"redlock", "redlock", func() *padlocktest.Server { return masters3 }, 3, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			h := newHarness(t, c.g(), c.scheme, "")
			defer h.Close()
			open := func() *padlock.Locker {
				// A long lease: no renewal runs a script during the test.
				l, err := h.NewLocker(ctx, padlock.WithTTL(10*time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
				return l
			}
			const name = "wakeone"
			waiters := h.prefix + ":{" + name + "}:waiters"
			inLine := func(n int) {
				t.Helper()
				padlocktest.WaitFor(t, fmt.Sprintf("%d waiters registered", n), 30*time.Second, func() bool {
					got := 0
					for _, a := range h.admin {
						got += int(a.ZCard(ctx, waiters).Val())
					}
					return got == n*c.copies
				})
			}
			a := open()
			// Once uncontended, so that the server has the scripts (no
			// NOSCRIPT and second call below).
			lk, err := a.Lock(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			base := scriptCalls(ctx, t, h.admin)
			if lk, err = a.Lock(ctx, name); err != nil {
				t.Fatal(err)
			}
			type grant struct {
				who string
				lk  *padlock.Lock
				err error
			}
			grants := make(chan grant, 3)
			for i, who := range []string{"B", "C", "D"} {
				l := open()
				go func() {
					lk, err := l.Lock(ctx, name)
					grants <- grant{who, lk, err}
				}()
				inLine(i + 1)
			}
			// Each waiter tries twice before it waits: once, then again
			// once subscribed (a release in between would otherwise be
			// missed). A's Lock is the 7th call.
			calls := int64(7 * c.copies)
			padlocktest.WaitFor(t, fmt.Sprintf("every waiter waiting (%d script calls since A's Lock began)", calls), 30*time.Second, func() bool {
				return scriptCalls(ctx, t, h.admin)-base == calls
			})
			before := base + calls
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			var order []string
			for range 3 {
				g := <-grants
				if g.err != nil {
					t.Fatalf("%s: %v", g.who, g.err)
				}
				order = append(order, g.who)
				if err := g.lk.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if got := strings.Join(order, ""); got != "BCD" {
				t.Errorf("granted in the order %s, want BCD (the order they asked in)", got)
			}
			if got := scriptCalls(ctx, t, h.admin) - before; c.counted && got != calls {
				t.Errorf("%d script calls from the first release to the last, want %d (a release and a granted try per hand-off, and the last release): waiters were woken that could not be granted", got, calls)
			}
			padlocktest.WaitFor(t, "no waiters keys left once every wait ended", 30*time.Second, func() bool {
				for _, a := range h.admin {
					if a.Exists(ctx, waiters, h.prefix+":{"+name+"}:reserved").Val() != 0 {
						return false
					}
				}
				return true
			})
		})
	}
}

// A release that finds no waiter on one server or a Cluster publishes
// nothing: every waiter there is in the name's waiters or fair queue, so
// a message would wake nobody, and on a Cluster it would still travel to
// every node. Counted on the servers (a script's PUBLISH counts among
// the server's commands). RedLock is as it was: each release publishes on
// every master. Not on Sentinel's primary, which runs the one-server
// scripts: the Sentinels themselves PUBLISH their hello messages there
// every two seconds, which the count could not tell apart. The waking of registered
// waiters is TestNonFairReleaseWakesOne's, and the conformance suite's.
func TestUncontendedReleasePublishesNothing(t *testing.T) {
	needServers(t)
	for _, c := range []struct {
		name, scheme, query string
		g                   func() *padlocktest.Server
		perRelease          int64 // PUBLISH calls a release makes
	}{
		{"single", "redis", "", func() *padlocktest.Server { return single }, 0},
		{"single fair", "redis", "fair=true", func() *padlocktest.Server { return single }, 0},
		{"cluster", "redis+cluster", "", func() *padlocktest.Server { return cluster }, 0},
		{"redlock", "redlock", "", func() *padlocktest.Server { return masters3 }, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			h := newHarness(t, c.g(), c.scheme, c.query)
			defer h.Close()
			l, err := h.NewLocker(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			const cycles = 20
			publishes := func() int64 {
				n := 0
				for _, a := range h.admin {
					n += commandCalls(t, a, "publish")
				}
				return int64(n)
			}
			base := publishes()
			for range cycles {
				lk, err := l.Lock(ctx, "quiet")
				if err != nil {
					t.Fatal(err)
				}
				if err := lk.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := publishes()-base, cycles*c.perRelease; got != want {
				t.Errorf("%d PUBLISH calls in %d uncontended cycles, want %d", got, cycles, want)
			}
		})
	}
}

// scriptCalls is the number of scripts the servers have run (EVAL and
// EVALSHA), summed over admins.
func scriptCalls(ctx context.Context, t *testing.T, admins []*goredis.Client) int64 {
	t.Helper()
	var n int64
	for _, a := range admins {
		info, err := a.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
					var calls int64
					if _, err := fmt.Sscanf(rest, "calls=%d", &calls); err == nil {
						n += calls
					}
				}
			}
		}
	}
	return n
}

// The scripts' non-fair line, run directly: a release wakes the first
// waiter alone (the next stays in line) and, when that waiter has waited
// over 5 ms, keeps the free name for it: another writer's try is refused
// for at most 100 ms, the kept waiter's try takes the name and the
// reservation goes. A waiter that has not waited long gets no
// reservation. A waiter that gives up after a release took it out of the
// line (it was woken and did not try) passes the wake-up to the next.
func TestNonFairLineScripts(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := goredis.NewClient(&goredis.Options{Addr: single.Nodes()[0].Addr})
	defer rdb.Close()
	acquire, release := loadScript(t, "acquire.lua", false), loadScript(t, "release.lua", true)
	leave := loadScript(t, "cancel.lua", true)
	for _, name := range []string{"kept", "fresh", "settled", "passed", "self"} {
		defer rdb.Del(ctx, scriptKeys("line", name)...)
	}
	// releaseKeys and cancelKeys are release.lua's and cancel.lua's key
	// lists, from acquire.lua's order (scriptKeys).
	releaseKeys := func(k []string) []string { return []string{k[0], k[2], k[3], k[1], k[4], k[5], k[6], k[7]} }
	nowUS := func() int64 {
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return now.UnixMicro()
	}
	listen := func(channel string) *goredis.PubSub {
		ps := rdb.Subscribe(ctx, channel)
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ps.Close() })
		return ps
	}
	woken := func(ps *goredis.PubSub, want string) {
		t.Helper()
		mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		m, err := ps.ReceiveMessage(mctx)
		if err != nil || m.Payload != want {
			t.Fatalf("wake-up %v %v, want %q", m, err, want)
		}
	}
	try := func(k []string, id string, place int64) []int64 {
		t.Helper()
		v, err := acquire.Run(ctx, rdb, k, id, 60000, "1", 60000, place).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	hold := func(k []string) {
		t.Helper()
		if v := try(k, "h", 0); v[0] != 1 {
			t.Fatalf("the first holder: %v", v)
		}
	}
	// line returns the keys and the wake-up channel of name, listened to.
	line := func(name string) ([]string, string, *goredis.PubSub) {
		channel := "line:{" + name + "}:wake"
		return scriptKeys("line", name), channel, listen(channel)
	}
	// released releases h's hold, which must have been there.
	released := func(k []string, channel string) {
		t.Helper()
		if n, err := release.Run(ctx, rdb, releaseKeys(k), "h", channel).Int(); err != nil || n != 1 {
			t.Fatalf("release: %d %v", n, err)
		}
	}

	t.Run("kept", func(t *testing.T) {
		k, channel, ps := line("kept")
		hold(k)
		w := nowUS() - 10_000 // arrived 10 ms ago
		rdb.ZAdd(ctx, k[6], goredis.Z{Score: float64(w), Member: "w"}, goredis.Z{Score: float64(w + 1), Member: "v"})
		released(k, channel)
		woken(ps, "w")
		if _, err := rdb.ZScore(ctx, k[6], "v").Result(); err != nil {
			t.Errorf("the second waiter left the line at a release that could grant one: %v", err)
		}
		if got, _ := rdb.Get(ctx, k[7]).Result(); got != "w" {
			t.Fatalf("reserved for %q, want the waiter that waited 10 ms", got)
		}
		if p := rdb.PTTL(ctx, k[7]).Val(); p <= 0 || p > 100*time.Millisecond {
			t.Errorf("reservation lasts %v, want at most 100ms", p)
		}
		if v := try(k, "x", 0); v[0] != 0 || v[1] > 100 || len(v) != 3 {
			t.Errorf("another writer's try beside the reservation: %v, want refused for at most 100 ms, in line", v)
		}
		if v := try(k, "w", w); v[0] != 1 {
			t.Errorf("the kept waiter's try: %v, want granted", v)
		}
		if n := rdb.Exists(ctx, k[7]).Val(); n != 0 {
			t.Error("the reservation outlived its waiter's grant")
		}
		if _, err := rdb.ZScore(ctx, k[6], "w").Result(); err != goredis.Nil {
			t.Errorf("the granted waiter is still in line: %v", err)
		}
	})

	t.Run("fresh", func(t *testing.T) {
		k, channel, ps := line("fresh")
		hold(k)
		rdb.ZAdd(ctx, k[6], goredis.Z{Score: float64(nowUS() + int64(time.Hour/time.Microsecond)), Member: "f"})
		released(k, channel)
		woken(ps, "f")
		if n := rdb.Exists(ctx, k[7]).Val(); n != 0 {
			t.Error("a reservation for a waiter that had not waited")
		}
	})

	// RedLock's settling try ('2'), by a waiter w granted a quorum
	// elsewhere, under the hold id "s": where the old holder is still
	// there, it is refused and leaves the line (and a name kept for it);
	// once the name is free, it takes it, kept for it or not.
	t.Run("settled", func(t *testing.T) {
		k, channel, _ := line("settled")
		settle := func(place int64) []int64 {
			t.Helper()
			v, err := acquire.Run(ctx, rdb, k, "s", 60000, "2", 60000, place, "w").Int64Slice()
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		inLine := func(who string) bool {
			_, err := rdb.ZScore(ctx, k[6], who).Result()
			return err == nil
		}
		hold(k)
		w := nowUS() - 10_000
		rdb.ZAdd(ctx, k[6], goredis.Z{Score: float64(w), Member: "w"}, goredis.Z{Score: float64(w + 1), Member: "v"})
		if v := settle(w); v[0] != 0 || len(v) != 2 {
			t.Fatalf("settling beside the old holder: %v, want refused and not in line", v)
		}
		if inLine("w") || !inLine("v") {
			t.Fatalf("after a refused settling try: w in line %v (want false), v %v (want true)", inLine("w"), inLine("v"))
		}
		// The old holder's release lands: it wakes v (the line's head now),
		// and keeps the name for it; a settling try is refused by that.
		released(k, channel)
		if v := settle(w); v[0] != 0 {
			t.Fatalf("settling on a name kept for another: %v, want refused", v)
		}
		rdb.Del(ctx, k[7])
		// Kept for w (woken before its settling try came): taken, and the
		// reservation and w's place go.
		rdb.ZAdd(ctx, k[6], goredis.Z{Score: float64(w), Member: "w"})
		rdb.Set(ctx, k[7], "w", time.Minute)
		if v := settle(w); v[0] != 1 {
			t.Fatalf("settling on a name kept for it: %v, want granted", v)
		}
		if got, _ := rdb.Get(ctx, k[0]).Result(); got != "s" {
			t.Errorf("the lock key holds %q, want the settling hold's id s", got)
		}
		if inLine("w") || rdb.Exists(ctx, k[7]).Val() != 0 {
			t.Errorf("after the settling grant: w in line %v, reservation %d; want neither", inLine("w"), rdb.Exists(ctx, k[7]).Val())
		}
	})

	// A holder whose own id is still in the line (its refused try joined
	// it, and the retry after a lost answer was granted, its place
	// unknown) is not woken by its own release, nor is the name kept for
	// it: the next waiter is woken, and the holder's entry goes.
	t.Run("self", func(t *testing.T) {
		k, channel, ps := line("self")
		hold(k)
		w := nowUS() - 10_000
		rdb.ZAdd(ctx, k[6], goredis.Z{Score: float64(w), Member: "h"}, goredis.Z{Score: float64(w + 1), Member: "v"})
		released(k, channel)
		woken(ps, "v")
		if _, err := rdb.ZScore(ctx, k[6], "h").Result(); err != goredis.Nil {
			t.Errorf("the releasing holder's own entry is still in line: %v", err)
		}
		if got, _ := rdb.Get(ctx, k[7]).Result(); got != "v" {
			t.Errorf("reserved for %q, want v, the waiter that waited 10 ms", got)
		}
	})

	t.Run("passed", func(t *testing.T) {
		k, channel, ps := line("passed")
		rdb.ZAdd(ctx, k[6], goredis.Z{Score: 1, Member: "c"})
		// b was taken out of the line to be woken, and gives up: the name
		// is free, so c is woken instead.
		if n, err := leave.Run(ctx, rdb, releaseKeys(k), "b", channel, "1").Int(); err != nil || n != 0 {
			t.Fatalf("b leaving: %d %v, want 0 (not in line)", n, err)
		}
		woken(ps, "c")
		if n := rdb.Exists(ctx, k[6]).Val(); n != 0 {
			t.Error("c is still in line after its wake-up")
		}
	})
}

// On a Cluster each Locker subscribes a name's wake-up channel on the
// master that owns the name's slot, where the release scripts publish:
// counted on each master (PUBSUB NUMSUB is a node's own), every waiter's
// subscription is on that master and on no other. Each of many fresh
// Lockers waits once, on names spread over the masters: the waker's
// connection was once made by go-redis's receiving goroutine when it ran
// before the first SUBSCRIBE, to a random node, in about one Locker in
// three, and that Locker's wake-ups then came over the cluster bus.
func TestClusterWaitersSubscribeOnSlotMaster(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h := newHarness(t, cluster, "redis+cluster", "")
	defer h.Close()
	open := func() *padlock.Locker {
		l, err := h.NewLocker(ctx, padlock.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	holder := open()
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{cluster.Nodes()[0].Addr}})
	defer cc.Close()
	const lockers = 12
	for i := range lockers {
		name := fmt.Sprintf("slot/%d", i)
		lk, err := holder.Lock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		waiter := open()
		res := make(chan error, 1)
		go func() {
			w, err := waiter.Lock(ctx, name)
			if err == nil {
				err = w.Unlock(ctx)
			}
			res <- err
		}()
		channel := h.prefix + ":{" + name + "}:wake"
		master, err := cc.MasterForKey(ctx, channel)
		if err != nil {
			t.Fatal(err)
		}
		var on []string
		padlocktest.WaitFor(t, "the waiter's subscription to "+channel, 30*time.Second, func() bool {
			on = on[:0]
			for _, a := range h.admin {
				n, err := a.PubSubNumSub(ctx, channel).Result()
				if err != nil {
					t.Fatal(err)
				}
				if n[channel] > 0 {
					on = append(on, a.Options().Addr)
				}
			}
			return len(on) > 0
		})
		if len(on) != 1 || on[0] != master.Options().Addr {
			t.Errorf("Locker %d: %s subscribed on %v, want on its slot's master %s only", i, channel, on, master.Options().Addr)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-res; err != nil {
			t.Fatal(err)
		}
		waiter.Close()
	}
}
