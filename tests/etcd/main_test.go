// Package etcd_test tests padlock's etcd backend against real servers.
// Its files are laid out as every backend's under tests/ (docs/testing.md,
// "Where tests live"): main_test.go starts the servers the package shares,
// harness_test.go holds the conformance harness and the helpers the files
// share, conformance_test.go runs the conformance suite, open_test.go
// checks Open, URLs and refused connections, faults_test.go the
// backend's own faults, features_test.go its own behaviour, and
// tls_test.go TLS.
package etcd_test

import (
	"context"
	"sync/atomic"
	"testing"

	_ "github.com/padlock-go/padlock/etcd"
	"github.com/padlock-go/padlock/padlocktest"
)

// The package's tests share one etcd server process; each subtest works
// under its own key prefix.
var (
	server   *padlocktest.Server
	prefixes atomic.Int64
)

func TestMain(m *testing.M) {
	padlocktest.Main(m, func(ctx context.Context) (func(), error) {
		var err error
		server, err = padlocktest.New(ctx, padlocktest.Etcd, padlocktest.Nodes(1))
		if err != nil {
			return nil, err
		}
		return server.Close, nil
	})
}
