package padlocktest_test

import (
	"errors"
	"os"
	"testing"
	"time"

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
			if err := n.Restart(ctx); err != nil {
				t.Fatal(err)
			}
			if err := n.Pause(); err != nil {
				t.Fatal(err)
			}
			if err := n.Resume(); err != nil {
				t.Fatal(err)
			}
			if err := n.Kill(); err != nil {
				t.Fatal(err)
			}
			if n.Running() {
				t.Fatal("a killed container is Running")
			}
			if err := srv.Start(ctx); err != nil {
				t.Fatal(err)
			}
			lockRoundTrip(t, ctx, srv.URL())
		})
	}
	t.Run("unsupported", func(t *testing.T) {
		_, err := padlocktest.New(testCtx(t, time.Minute), padlocktest.RedisCluster)
		if !errors.Is(err, padlocktest.ErrUnsupported) {
			t.Errorf("a Redis Cluster in containers: %v, want ErrUnsupported", err)
		}
	})
}
