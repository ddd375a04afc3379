package padlocktest_test

import (
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock"
	_ "github.com/padlock-go/padlock/all"
	"github.com/padlock-go/padlock/padlocktest"
)

// A Sentinel server fails over: its primary killed, the Sentinel promotes
// the replica, and a padlock client on the server's URL follows it. Keys
// written after the replica stopped taking the stream are lost with the
// primary: what asynchronous replication costs.
func TestSentinelFailover(t *testing.T) {
	ctx := testCtx(t, 3*time.Minute)
	srv := padlocktest.Start(t, padlocktest.RedisSentinel)
	primary, replica := srv.Nodes()[0], srv.Nodes()[1]
	sentinel := goredis.NewSentinelClient(&goredis.Options{Addr: srv.Sentinels()[0].Addr})
	t.Cleanup(func() { sentinel.Close() })
	master := func() string {
		a, err := sentinel.GetMasterAddrByName(ctx, padlocktest.SentinelMaster).Result()
		if err != nil {
			return err.Error()
		}
		return strings.Join(a, ":")
	}
	if m := master(); m != primary.Addr {
		t.Fatalf("the Sentinel names %s as primary, want %s", m, primary.Addr)
	}
	l, err := padlock.Open(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if _, err := l.TryLock(ctx, "before"); err != nil {
		t.Fatal(err)
	}

	// The replica stops taking the stream (paused, its link closed by the
	// primary: a paused process still receives what the kernel buffers);
	// a second lock exists only on the primary when it dies.
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	admin := goredis.NewClient(&goredis.Options{Addr: primary.Addr})
	t.Cleanup(func() { admin.Close() })
	if err := admin.ClientKillByFilter(ctx, "TYPE", "replica").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryLock(ctx, "unreplicated", padlock.WithTTL(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := primary.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := replica.Resume(); err != nil {
		t.Fatal(err)
	}
	padlocktest.WaitFor(t, "the Sentinel to promote the replica", 2*time.Minute, func() bool { return master() == replica.Addr })

	// The client follows: the lock taken after the pause is gone, so
	// another Locker takes it at once.
	l2, err := padlock.Open(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l2.Close() })
	var lk2 *padlock.Lock
	padlocktest.WaitFor(t, "a lock on the promoted replica", time.Minute, func() bool {
		lk2, err = l2.TryLock(ctx, "unreplicated")
		return err == nil
	})
	if err := lk2.Unlock(ctx); err != nil {
		t.Error(err)
	}
}

// A Sentinel server restarted after the Sentinel saw its primary down
// (s_down: the restart outlasted down-after-milliseconds, as it does on a
// loaded machine) is whole when Start returns: the Sentinel has seen the
// primary answer again and runs no failover, so none starts under the
// tests that follow. (Start returned while the Sentinel still had the
// primary down; a failover then moved the primary during the conformance
// suite's ManyLocks.)
func TestSentinelRestartSettles(t *testing.T) {
	ctx := testCtx(t, 3*time.Minute)
	srv := padlocktest.Start(t, padlocktest.RedisSentinel)
	sentinel := goredis.NewSentinelClient(&goredis.Options{Addr: srv.Sentinels()[0].Addr})
	t.Cleanup(func() { sentinel.Close() })
	flags := func() string {
		m, err := sentinel.Master(ctx, padlocktest.SentinelMaster).Result()
		if err != nil {
			return err.Error()
		}
		return m["flags"]
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	padlocktest.WaitFor(t, "the Sentinel to see the primary down", time.Minute, func() bool { return strings.Contains(flags(), "s_down") })
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if f := flags(); f != "master" {
		t.Fatalf("after Start, the Sentinel's flags for the primary are %q, want \"master\" (up, no failover under way)", f)
	}
	m, err := sentinel.GetMasterAddrByName(ctx, padlocktest.SentinelMaster).Result()
	if err != nil || strings.Join(m, ":") != srv.Nodes()[0].Addr {
		t.Fatalf("after Start, the Sentinel names %v (%v) as primary, want %s", m, err, srv.Nodes()[0].Addr)
	}
}
