// Package zookeeper_test tests padlock's ZooKeeper backend against real
// servers.
// Its files are laid out as every backend's under tests/ (docs/testing.md,
// "Where tests live"): main_test.go starts the servers the package shares,
// harness_test.go holds the conformance harness and the helpers the files
// share, conformance_test.go runs the conformance suite, open_test.go
// checks Open, URLs and refused connections, faults_test.go the
// backend's own faults, features_test.go its own behaviour, and
// tls_test.go TLS.
package zookeeper_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/padlock-go/padlock/padlocktest"
	_ "github.com/padlock-go/padlock/zookeeper"
)

// The package's tests share one standalone server and one 3-member
// ensemble; each subtest works under its own lock root.
var (
	single, ensemble *padlocktest.Server
	startErr         error
	roots            atomic.Int64
)

func TestMain(m *testing.M) {
	padlocktest.Main(m, func(ctx context.Context) (func(), error) {
		stop := func() {
			for _, e := range []*padlocktest.Server{single, ensemble} {
				if e != nil {
					e.Close()
				}
			}
		}
		if single, startErr = padlocktest.New(ctx, padlocktest.ZooKeeper, padlocktest.Nodes(1)); startErr != nil {
			return stop, startErr
		}
		ensemble, startErr = padlocktest.New(ctx, padlocktest.ZooKeeper, padlocktest.Nodes(3))
		return stop, startErr
	})
}

func needServers(t testing.TB) {
	t.Helper()
	if startErr != nil {
		t.Skipf("zookeeper not available: %v", startErr)
	}
}
