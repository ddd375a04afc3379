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
// then leaves that master's waiters afterwards).
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
