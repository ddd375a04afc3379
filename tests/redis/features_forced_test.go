package redis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/padlocktest"
)

// denyForce makes the forced release of user fail on the master admin
// reaches, before it changes anything there, or lets it run again (deny
// false): release.lua's first write in a forced release is the ZADD of
// its record, which nothing else user runs here needs (Holders's
// inspect.lua only reads).
func denyForce(ctx context.Context, admin *goredis.Client, user string, deny bool) error {
	rule := "-zadd"
	if !deny {
		rule = "+zadd"
	}
	return admin.Do(ctx, "acl", "setuser", user, rule).Err()
}

// On RedLock a forced release counts only when the hold is gone from so
// many masters that too few are left for it to stand. Released on one
// master of three (the other two refuse the operator's release), the
// holder still holds on two, a quorum: ForceUnlock is ErrUnavailable and
// says on how many masters it released the hold, having released it on
// the one it could, and the holder goes on holding. Gone from two of
// three (one released now, one that had lost it already), the hold is
// broken and ForceUnlock succeeds, though one master refused.
func TestRedLockForceUnlockNeedsAQuorumGone(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ttl = 3 * time.Second
	h := newHarness(t, masters3, "redlock", fmt.Sprintf("ttl=%v", ttl))
	defer h.Close()
	holder, err := h.NewLocker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	op, err := h.NewLocker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	user := h.userOf(op)
	lockKey := h.prefix + ":{job}:lock"

	t.Run("minority", func(t *testing.T) {
		lk, err := holder.Lock(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Unlock(context.Background())
		for _, i := range []int{0, 1} {
			if err := denyForce(ctx, h.admin[i], user, true); err != nil {
				t.Fatal(err)
			}
		}
		_, err = op.ForceUnlock(ctx, "job")
		for _, i := range []int{0, 1} {
			if err := denyForce(ctx, h.admin[i], user, false); err != nil {
				t.Fatal(err)
			}
		}
		if !errors.Is(err, padlock.ErrUnavailable) || !strings.Contains(err.Error(), "released on 1 of 3 masters") {
			t.Fatalf("ForceUnlock released on 1 master of 3 = %v, want ErrUnavailable saying it released on 1 of 3 masters", err)
		}
		t.Logf("ForceUnlock: %v", err)
		// It still released the hold on the master it could reach, and
		// left it on the two that refused.
		for i, a := range h.admin {
			n, err := a.Exists(ctx, lockKey).Result()
			if err != nil {
				t.Fatal(err)
			}
			if want := int64(1); i == 2 {
				if n != 0 {
					t.Errorf("master 2 (which ran the release) still has the hold")
				}
			} else if n != want {
				t.Errorf("master %d (which refused the release) lost the hold", i)
			}
		}
		// The holder holds on a quorum: it goes on holding, through
		// renewals, and Holders still names it.
		select {
		case <-lk.Done():
			t.Fatalf("the hold ended though a quorum of masters still had it: %v", lk.Err())
		case <-time.After(ttl):
		}
		if hs, err := op.Holders(ctx, "job"); err != nil || len(hs) != 1 || hs[0].Token != lk.Token() {
			t.Fatalf("Holders after the failed ForceUnlock = %+v, %v, want the holder (token %d)", hs, err, lk.Token())
		}
		// With every master answering, the same call takes it away.
		if got, err := op.ForceUnlock(ctx, "job"); err != nil || got.Token != lk.Token() {
			t.Fatalf("ForceUnlock on every master = %+v, %v, want the hold of token %d", got, err, lk.Token())
		}
		select {
		case <-lk.Done():
			if !errors.Is(lk.Err(), padlock.ErrLost) {
				t.Errorf("forced hold ended with %v, want ErrLost", lk.Err())
			}
		case <-time.After(2 * ttl):
			t.Fatal("the forced hold's Done did not close")
		}
	})

	t.Run("gone from a quorum", func(t *testing.T) {
		lk, err := holder.Lock(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Unlock(context.Background())
		// Master 0 lost the hold already; master 1 refuses; master 2
		// releases it. Gone from 2 of 3, it is left on one: broken.
		if err := h.admin[0].Del(ctx, lockKey).Err(); err != nil {
			t.Fatal(err)
		}
		if err := denyForce(ctx, h.admin[1], user, true); err != nil {
			t.Fatal(err)
		}
		got, err := op.ForceUnlock(ctx, "job")
		if err := denyForce(ctx, h.admin[1], user, false); err != nil {
			t.Fatal(err)
		}
		if err != nil || got.Token != lk.Token() {
			t.Fatalf("ForceUnlock of a hold gone from 2 masters of 3 = %+v, %v, want the hold of token %d", got, err, lk.Token())
		}
		select {
		case <-lk.Done():
			if !errors.Is(lk.Err(), padlock.ErrLost) {
				t.Errorf("forced hold ended with %v, want ErrLost", lk.Err())
			}
		case <-time.After(2 * ttl):
			t.Fatal("the forced hold's Done did not close")
		}
	})
}

// A forced release of a name with several holds that fails on one of
// them still tries the others, and its error says how many it released
// and names the hold it failed on. Here the operator may not run PEXPIREAT,
// which release.lua runs only while other holds remain (to make the
// name's keys live as long as the latest lease): the release of the older
// reader fails, the younger one's, the last, runs.
func TestForceUnlockReportsAPartialForce(t *testing.T) {
	needServers(t)
	for _, c := range []struct {
		name, scheme string
		g            func() *padlocktest.Server
	}{
		{"single", "redis", func() *padlocktest.Server { return single }},
		{"cluster", "redis+cluster", func() *padlocktest.Server { return cluster }},
		{"sentinel", "redis+sentinel", func() *padlocktest.Server { return sentinel }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			h := newHarness(t, c.g(), c.scheme, "ttl=3s")
			defer h.Close()
			var held []*padlock.Lock
			for range 2 {
				l, err := h.NewLocker(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				lk, err := l.RLock(ctx, "rw")
				if err != nil {
					t.Fatal(err)
				}
				defer lk.Unlock(context.Background())
				held = append(held, lk)
			}
			op, err := h.NewLocker(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer op.Close()
			if hs, err := op.Holders(ctx, "rw"); err != nil || len(hs) != 2 {
				t.Fatalf("Holders = %+v, %v, want the 2 readers", hs, err)
			}
			user := h.userOf(op)
			if err := h.setUser(ctx, user, "-pexpireat"); err != nil {
				t.Fatal(err)
			}
			_, err = op.ForceUnlock(ctx, "rw")
			if err := h.setUser(ctx, user, "+pexpireat"); err != nil {
				t.Fatal(err)
			}
			t.Logf("ForceUnlock: %v", err)
			if err == nil {
				t.Fatal("ForceUnlock that failed on a hold reported success")
			}
			if want := fmt.Sprintf("force-released 1 of the 2 holds of \"rw\"; failed on token %d", held[0].Token()); !strings.Contains(err.Error(), want) {
				t.Errorf("ForceUnlock = %v, want it to say %q", err, want)
			}
			// The younger reader was released all the same, and recorded.
			select {
			case <-held[1].Done():
				if !errors.Is(held[1].Err(), padlock.ErrLost) {
					t.Errorf("the younger reader ended with %v, want ErrLost", held[1].Err())
				}
			case <-time.After(10 * time.Second): // three leases
				t.Fatal("the younger reader still holds: the forced release stopped at the failure")
			}
			fs, err := op.ForcedReleases(ctx, "rw")
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, f := range fs {
				found = found || f.Token == held[1].Token()
			}
			if !found {
				t.Errorf("ForcedReleases = %+v, want a record of token %d", fs, held[1].Token())
			}
		})
	}
}
