package padlocktest_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/padlocktest"
)

// The containers provider, on a real container engine: every kind it runs
// starts, padlock locks on it, and a killed, restarted or paused node
// comes back on the same address. It runs with PADLOCK_SERVERS=containers
// (README: "Testing with containers"); this machine's CI has no engine.
func TestContainers(t *testing.T) {
	if os.Getenv(padlocktest.ServersEnv) != padlocktest.ProviderContainers {
		t.Skipf("set %s=%s, with a container engine, to run", padlocktest.ServersEnv, padlocktest.ProviderContainers)
	}
	for _, kind := range []padlocktest.Kind{padlocktest.Etcd, padlocktest.Redis, padlocktest.RedLock,
		padlocktest.ZooKeeper, padlocktest.Postgres, padlocktest.MySQL} {
		t.Run(string(kind), func(t *testing.T) {
			ctx := testCtx(t, 5*time.Minute)
			srv := padlocktest.Start(t, kind)
			if srv.Provider() != padlocktest.ProviderContainers {
				t.Fatalf("provider %s", srv.Provider())
			}
			lockRoundTrip(t, ctx, srv.URL())
			n := srv.Nodes()[0]
			l, err := padlock.Open(ctx, srv.URL())
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			tryLock := func(d time.Duration) error {
				tctx, cancel := context.WithTimeout(ctx, d)
				defer cancel()
				lk, err := l.TryLock(tctx, "containers")
				if err == nil {
					lk.Unlock(ctx)
				}
				return err
			}

			if err := n.Pause(); err != nil {
				t.Fatal(err)
			}
			if !n.Running() {
				t.Error("a paused container is not Running")
			}
			if err := tryLock(2 * time.Second); err == nil {
				t.Error("a paused server granted a lock")
			}
			if err := n.Resume(); err != nil {
				t.Fatal(err)
			}
			padlocktest.WaitFor(t, "a lock after Resume", time.Minute, func() bool { return tryLock(5*time.Second) == nil })

			if err := n.Kill(); err != nil {
				t.Fatal(err)
			}
			if n.Running() {
				t.Fatal("a killed container is Running")
			}
			dialRefused(t, n.Addr)
			if err := srv.Start(ctx); err != nil {
				t.Fatal(err)
			}
			padlocktest.WaitFor(t, "a lock after Start", time.Minute, func() bool { return tryLock(5*time.Second) == nil })
			if err := n.Restart(ctx); err != nil {
				t.Fatal(err)
			}
			padlocktest.WaitFor(t, "a lock after Restart", time.Minute, func() bool { return tryLock(5*time.Second) == nil })
		})
	}
	t.Run("unsupported", func(t *testing.T) {
		_, err := padlocktest.New(testCtx(t, time.Minute), padlocktest.RedisCluster)
		if !errors.Is(err, padlocktest.ErrUnsupported) {
			t.Errorf("a Redis Cluster in containers: %v, want ErrUnsupported", err)
		}
	})
}
