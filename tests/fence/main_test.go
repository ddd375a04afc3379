// Package fence_test tests package fence against real servers: PostgreSQL,
// MariaDB, Redis (single and Cluster), etcd and ZooKeeper, each started by
// padlocktest on loopback. Each store's file checks that a stale token is
// refused and an equal or newer one accepted, runs concurrent writers with
// interleaved tokens whose history porcupine checks against a fencing
// register (register_test.go), and checks that nothing is left behind but
// the documented token keys.
package fence_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/padlock-go/padlock/padlocktest"
)

// The package's servers, started once in TestMain.
var (
	pg, maria, rdb, cluster, etcd, zoo *padlocktest.Server
	startErr                           error
)

func TestMain(m *testing.M) {
	padlocktest.Main(m, func(ctx context.Context) (func(), error) {
		servers := []struct {
			to   **padlocktest.Server
			kind padlocktest.Kind
		}{{&pg, padlocktest.Postgres}, {&maria, padlocktest.MySQL}, {&rdb, padlocktest.Redis},
			{&cluster, padlocktest.RedisCluster}, {&etcd, padlocktest.Etcd}, {&zoo, padlocktest.ZooKeeper}}
		stop := func() {
			for _, s := range servers {
				if *s.to != nil {
					(*s.to).Close()
				}
			}
		}
		errs := make([]error, len(servers))
		var wg sync.WaitGroup
		for i, s := range servers {
			wg.Go(func() { *s.to, errs[i] = padlocktest.New(ctx, s.kind) })
		}
		wg.Wait()
		startErr = errors.Join(errs...)
		return stop, startErr
	})
}

// need skips when a server could not start (padlocktest.Main has failed the
// run already when CI requires servers).
func need(t *testing.T, s *padlocktest.Server) {
	t.Helper()
	if s == nil {
		t.Skipf("test server not available: %v", startErr)
	}
}
