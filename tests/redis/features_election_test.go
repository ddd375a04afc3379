package redis_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/padlocktest"
)

// What the conformance suite cannot see of elections on Redis: where the
// value is kept (the name's values hash, beside the lock key, read here
// with an admin client), what a Proclaim changes on the server and what it
// leaves (the leases), and the pub/sub pushes behind Observe.

// electionKey is one of name's keys under the harness's prefix.
func electionKey(h *harness, name, kind string) string {
	return h.prefix + ":{" + name + "}:" + kind
}

// holderID returns the id of name's one holder, read by Holders.
func holderID(t *testing.T, ctx context.Context, l *padlock.Locker, name string) string {
	t.Helper()
	hs, err := l.Holders(ctx, name)
	if err != nil || len(hs) != 1 {
		t.Fatalf("Holders(%q) = %+v, %v; want one", name, hs, err)
	}
	return hs[0].ID
}

// A candidacy's value is in the values hash, under its hold id, from the
// script that granted the lock (in fair mode, the one that queued it), and
// the hash expires with the lease; Holders reports it. A plain Lock writes
// no value and is no leader. Resign takes the value with the claim, and a
// cancelled candidate in the fair queue takes its own.
func TestElectionValueBesideClaim(t *testing.T) {
	needServers(t)
	for _, fair := range []string{"false", "true"} {
		t.Run("fair="+fair, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			h := newHarness(t, single, "redis", "fair="+fair)
			h.ttl = 30 * time.Second
			t.Cleanup(func() { h.Close() })
			a := conformance.NewLocker(ctx, t, h, padlock.WithTTL(h.ttl))
			b := conformance.NewLocker(ctx, t, h, padlock.WithTTL(h.ttl))
			admin := h.admin[0]
			values := electionKey(h, "el", "values")

			ld, err := a.Election("el").Campaign(ctx, "10.0.0.7:8080")
			if err != nil {
				t.Fatal(err)
			}
			id := holderID(t, ctx, a, "el")
			if got := admin.Get(ctx, electionKey(h, "el", "lock")).Val(); got != id {
				t.Errorf("lock key holds %q, want the hold id %q", got, id)
			}
			if got := admin.HGetAll(ctx, values).Val(); len(got) != 1 || got[id] != "10.0.0.7:8080" {
				t.Errorf("values hash = %v; want the leader's id with its value", got)
			}
			if p := admin.PTTL(ctx, values).Val(); p <= 0 || p > h.ttl {
				t.Errorf("values hash PTTL %v; want the lease's (at most %v)", p, h.ttl)
			}
			hs, err := a.Holders(ctx, "el")
			if err != nil || len(hs) != 1 || !hs[0].Elect || hs[0].Value != "10.0.0.7:8080" || hs[0].Token != ld.Token() {
				t.Errorf("Holders = %+v, %v; want the candidacy with its value and token", hs, err)
			}

			if fair == "true" {
				// A waiting candidate's value is stored with its place, and
				// leaves with it.
				cctx, ccancel := context.WithCancel(ctx)
				res := make(chan error, 1)
				go func() {
					_, err := b.Election("el").Campaign(cctx, "waiting")
					res <- err
				}()
				padlocktest.WaitFor(t, "the candidate's value with its place", 30*time.Second, func() bool {
					return admin.HLen(ctx, values).Val() == 2 && admin.ZCard(ctx, electionKey(h, "el", "queue")).Val() == 1
				})
				ccancel()
				if err := <-res; !errors.Is(err, context.Canceled) {
					t.Fatalf("cancelled Campaign = %v", err)
				}
				padlocktest.WaitFor(t, "the cancelled candidate's value to go", 30*time.Second, func() bool {
					got := admin.HGetAll(ctx, values).Val()
					return len(got) == 1 && got[id] == "10.0.0.7:8080"
				})
			}
			if err := ld.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			if n := admin.Exists(ctx, values).Val(); n != 0 {
				t.Errorf("the values hash outlives the resignation: %v", admin.HGetAll(ctx, values).Val())
			}

			lk, err := b.Lock(ctx, "el")
			if err != nil {
				t.Fatal(err)
			}
			if n := admin.Exists(ctx, values).Val(); n != 0 {
				t.Errorf("a plain Lock wrote a value: %v", admin.HGetAll(ctx, values).Val())
			}
			if got, err := a.Election("el").Leader(ctx); !errors.Is(err, padlock.ErrNoLeader) {
				t.Errorf("Leader while a plain Lock holds the name = %+v, %v; want ErrNoLeader", got, err)
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A Proclaim replaces the value and nothing else: the lock key's and the
// hash's expiries are what they were (they only run down), and the next
// renewal extends both as before.
func TestElectionProclaimKeepsLease(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h := newHarness(t, single, "redis", "")
	h.ttl = 15 * time.Second // renewed about every 5s: none between the reads below
	t.Cleanup(func() { h.Close() })
	a := conformance.NewLocker(ctx, t, h, padlock.WithTTL(h.ttl))
	admin := h.admin[0]
	lock, values := electionKey(h, "el", "lock"), electionKey(h, "el", "values")

	ld, err := a.Election("el").Campaign(ctx, "v1")
	if err != nil {
		t.Fatal(err)
	}
	id := holderID(t, ctx, a, "el")
	lockBefore, valuesBefore := admin.PTTL(ctx, lock).Val(), admin.PTTL(ctx, values).Val()
	if err := ld.Proclaim(ctx, "v2"); err != nil {
		t.Fatal(err)
	}
	lockAfter, valuesAfter := admin.PTTL(ctx, lock).Val(), admin.PTTL(ctx, values).Val()
	read := time.Now()
	if lockAfter <= 0 || lockAfter > lockBefore || valuesAfter <= 0 || valuesAfter > valuesBefore {
		t.Fatalf("PTTL of lock %v → %v, of values %v → %v across a Proclaim; want both kept (running down)",
			lockBefore, lockAfter, valuesBefore, valuesAfter)
	}
	if got := admin.HGet(ctx, values, id).Val(); got != "v2" {
		t.Fatalf("values hash holds %q for the leader, want the proclaimed v2", got)
	}
	// The renewal after it: both leases extended (above what is left of
	// them without it), the value kept.
	padlocktest.WaitFor(t, "a renewal after the Proclaim", 2*h.ttl, func() bool {
		return admin.PTTL(ctx, lock).Val() > lockAfter-time.Since(read)+time.Second
	})
	if p := admin.PTTL(ctx, values).Val(); p <= valuesAfter-time.Since(read)+time.Second {
		t.Errorf("the renewal left the values hash's PTTL at %v (%v after the Proclaim, %v ago)", p, valuesAfter, time.Since(read))
	}
	select {
	case <-ld.Done():
		t.Fatalf("the leader lost its term after a Proclaim: %v", ld.Err())
	default:
	}
	got, err := a.Election("el").Leader(ctx)
	if err != nil || got != (padlock.Leader{Value: "v2", Token: ld.Token()}) {
		t.Errorf("Leader after the renewal = %+v, %v; want v2", got, err)
	}
	if err := ld.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

// A deposed leader's Proclaim reaches the server (its lease is long, so
// it has not yet learnt it was forced out) and changes nothing there: the
// successor's value stands, read on the server, and no value of the old
// id comes back. On every scheme.
func TestElectionDeposedProclaim(t *testing.T) {
	needServers(t)
	for _, c := range []struct {
		name, scheme string
		g            func() *padlocktest.Server
	}{
		{"single", "redis", func() *padlocktest.Server { return single }},
		{"cluster", "redis+cluster", func() *padlocktest.Server { return cluster }},
		{"redlock", "redlock", func() *padlocktest.Server { return masters3 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			h := newHarness(t, c.g(), c.scheme, "")
			h.ttl = time.Minute // the old leader's renewal is 20s away
			t.Cleanup(func() { h.Close() })
			a := conformance.NewLocker(ctx, t, h, padlock.WithTTL(h.ttl))
			b := conformance.NewLocker(ctx, t, h, padlock.WithTTL(h.ttl))

			old, err := a.Election("el").Campaign(ctx, "old")
			if err != nil {
				t.Fatal(err)
			}
			oldID := holderID(t, ctx, a, "el")
			if _, err := a.ForceUnlock(ctx, "el"); err != nil {
				t.Fatal(err)
			}
			successor, err := b.Election("el").Campaign(ctx, "new")
			if err != nil {
				t.Fatal(err)
			}
			newID := holderID(t, ctx, b, "el")
			select {
			case <-old.Done():
				t.Fatalf("the old leader learnt of its loss before its Proclaim (%v): the server's compare is not tested", old.Err())
			default:
			}
			if err := old.Proclaim(ctx, "old again"); !errors.Is(err, padlock.ErrNotHeld) {
				t.Errorf("the deposed leader's Proclaim = %v, want ErrNotHeld", err)
			}
			// Every node: a RedLock master each, a cluster's slot owner.
			for i, admin := range h.admin {
				got, err := admin.HGetAll(ctx, electionKey(h, "el", "values")).Result()
				if goredis.HasErrorPrefix(err, "MOVED") {
					continue // a cluster node that does not own the slot
				}
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != 1 || got[newID] != "new" || got[oldID] != "" {
					t.Errorf("node %d: values hash = %v; want only the successor's %q", i, got, "new")
				}
			}
			ld, err := a.Election("el").Leader(ctx)
			if err != nil || ld != (padlock.Leader{Value: "new", Token: successor.Token()}) {
				t.Errorf("Leader = %+v, %v; want the successor's", ld, err)
			}
			if err := successor.Resign(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Observe is pushed by the wake-up channel: with an observer whose poll
// is an hour apart it still reports a grant, a Proclaim, a resignation
// (no leader) and the next grant, on every scheme (in fair mode the next
// grant is the release's hand-off to the waiting candidate). Once its
// context ends the watch goroutine is gone and the observer's client is
// subscribed to nothing (its Locker still open). A lease that runs out
// publishes nothing: Observe's poll reports it.
func TestElectionWatchPush(t *testing.T) {
	needServers(t)
	for _, c := range []struct {
		name, scheme, query string
		g                   func() *padlocktest.Server
	}{
		{"single", "redis", "", func() *padlocktest.Server { return single }},
		{"fair", "redis", "fair=true", func() *padlocktest.Server { return single }},
		{"cluster", "redis+cluster", "", func() *padlocktest.Server { return cluster }},
		{"sentinel", "redis+sentinel", "", func() *padlocktest.Server { return sentinel }},
		{"redlock", "redlock", "", func() *padlocktest.Server { return masters3 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			h := newHarness(t, c.g(), c.scheme, c.query)
			h.ttl = 30 * time.Second
			t.Cleanup(func() { h.Close() })
			a := conformance.NewLocker(ctx, t, h, padlock.WithTTL(h.ttl))
			b := conformance.NewLocker(ctx, t, h, padlock.WithTTL(h.ttl))
			// The observer's TTL sets Observe's poll: a third of an hour.
			o := conformance.NewLocker(ctx, t, h, padlock.WithTTL(time.Hour))

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
				padlocktest.WaitFor(t, "Observe to report "+what, 30*time.Second, func() bool {
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
			if c.query == "fair=true" {
				// The release hands the name to the waiting candidate.
				res := make(chan *padlock.Leadership, 1)
				go func() {
					ld, err := b.Election("push").Campaign(ctx, "b1")
					if err != nil {
						t.Error(err)
					}
					res <- ld
				}()
				padlocktest.WaitFor(t, "the candidate in the queue", 30*time.Second, func() bool {
					return h.admin[0].ZCard(ctx, electionKey(h, "push", "queue")).Val() == 1
				})
				if err := first.Resign(ctx); err != nil {
					t.Fatal(err)
				}
				second := <-res
				if second == nil {
					t.FailNow()
				}
				reports("the hand-off", padlock.Leader{Value: "b1", Token: second.Token()})
				if err := second.Resign(ctx); err != nil {
					t.Fatal(err)
				}
				reports("no leader after the resignation", padlock.Leader{})
			} else {
				if err := first.Resign(ctx); err != nil {
					t.Fatal(err)
				}
				reports("no leader after the resignation", padlock.Leader{})
				second, err := b.Election("push").Campaign(ctx, "b1")
				if err != nil {
					t.Fatal(err)
				}
				reports("the next grant", padlock.Leader{Value: "b1", Token: second.Token()})
				if err := second.Resign(ctx); err != nil {
					t.Fatal(err)
				}
			}

			ocancel()
			<-ended
			padlocktest.WaitFor(t, "the watch goroutine to end", 30*time.Second, func() bool { return !watchRunning() })
			padlocktest.WaitFor(t, "the observer's subscription to go", 30*time.Second, func() bool {
				on, err := subscribed(ctx, h.admin, "user", h.userOf(o))
				return err == nil && !on
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
			return bytes.Contains(buf[:n], []byte("redis.forward("))
		}
		buf = make([]byte, 2*len(buf))
	}
}

// A server restarted without persistence loses the fencing counter, and
// the next leader's token is below those Observe saw: Observe still
// reports that leader, once two reads agree on it. It dropped every lower
// term for good before, reporting no leader while one led.
func TestObserveAfterTheCounterIsLost(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h := newHarness(t, single, "redis", "")
	h.restart = single.Restart
	t.Cleanup(func() { h.Close() })
	a := conformance.NewLocker(ctx, t, h, padlock.WithTTL(2*time.Second))
	// A few terms first, so that the tokens seen are above the first one
	// a fresh counter gives.
	var ld *padlock.Leadership
	for i := range 4 {
		var err error
		if ld, err = a.Election("lost-counter").Campaign(ctx, fmt.Sprint("a", i)); err != nil {
			t.Fatal(err)
		}
		if i < 3 {
			if err := ld.Resign(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	high := ld.Token()
	o := conformance.NewLocker(ctx, t, h, padlock.WithTTL(2*time.Second))
	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	seen := o.Election("lost-counter").Observe(octx)
	var (
		mu   sync.Mutex
		last padlock.Leader
	)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for l := range seen {
			mu.Lock()
			last = l
			mu.Unlock()
		}
	}()
	defer func() { ocancel(); <-ended }()
	reports := func(what string, want func(padlock.Leader) bool) {
		t.Helper()
		padlocktest.WaitFor(t, "Observe to report "+what, time.Minute, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return want(last)
		})
	}
	reports("the leader of a high term", func(l padlock.Leader) bool { return l.Token == high })
	if err := h.RestartServer(ctx); err != nil {
		t.Fatal(err)
	}
	select { // its lease is gone with the server's state
	case <-ld.Done():
	case <-ctx.Done():
		t.Fatal("the leadership outlived the server's state")
	}
	b := conformance.NewLocker(ctx, t, h, padlock.WithTTL(2*time.Second))
	next, err := b.Election("lost-counter").Campaign(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	defer next.Resign(ctx)
	if next.Token() >= high {
		t.Fatalf("the counter survived the restart (token %d after %d): nothing to test", next.Token(), high)
	}
	reports("the new leader, of a lower term", func(l padlock.Leader) bool { return l.Value == "b" && l.Token == next.Token() })
}
