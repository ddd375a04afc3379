// Package redis_test tests padlock's Redis (single, Cluster, Sentinel,
// RedLock) backend against real servers.
// Its files are laid out as every backend's under tests/ (docs/testing.md,
// "Where tests live"): main_test.go starts the servers the package shares,
// harness_test.go holds the conformance harness and the helpers the files
// share, conformance_test.go runs the conformance suite, open_test.go
// checks Open, URLs and refused connections, faults_test.go the
// backend's own faults, features_test.go its own behaviour, and
// tls_test.go TLS.
package redis_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/padlock-go/padlock/padlocktest"
)

// The package's tests share these server processes; each subtest works
// under its own key prefix and its own ACL users.
var (
	single, cluster, masters3, masters5, sentinel *padlocktest.Server
	startErr                                      error
	prefixes                                      atomic.Int64
)

// keyspace turns on the keyspace notifications that WatchHolders follows
// on the servers whose Lockers can watch (one server, a Cluster, a
// Sentinel's, RedLock's masters): the conformance suite's WatchHolders
// runs on them. Redis
// leaves them off by default; the TLS suite's server keeps that default,
// and its WatchHolders says ErrUnsupported.
var keyspace = padlocktest.RedisKeyspaceEvents("KA")

// TestMain leaves go-redis's logger alone: padlock must keep it off stderr
// by itself (TestNothingOnStderr).
func TestMain(m *testing.M) {
	padlocktest.Main(m, func(ctx context.Context) (func(), error) {
		groups := []**padlocktest.Server{&single, &cluster, &masters3, &masters5, &sentinel}
		stop := func() {
			for _, g := range groups {
				if *g != nil {
					(*g).Close()
				}
			}
		}
		for _, start := range []func() error{
			func() (err error) {
				single, err = padlocktest.New(ctx, padlocktest.RedLock, padlocktest.Nodes(1), keyspace)
				return
			},
			func() (err error) {
				cluster, err = padlocktest.New(ctx, padlocktest.RedisCluster, padlocktest.Nodes(3), keyspace)
				return
			},
			func() (err error) {
				masters3, err = padlocktest.New(ctx, padlocktest.RedLock, padlocktest.Nodes(3), keyspace)
				return
			},
			func() (err error) {
				masters5, err = padlocktest.New(ctx, padlocktest.RedLock, padlocktest.Nodes(5))
				return
			},
			func() (err error) {
				sentinel, err = padlocktest.New(ctx, padlocktest.RedisSentinel, keyspace)
				return
			},
		} {
			if startErr = start(); startErr != nil {
				break
			}
		}
		return stop, startErr
	})
}

// needServers skips when redis-server is not installed, unless CI requires it
// (then TestMain has failed already).
func needServers(t *testing.T) {
	t.Helper()
	if startErr != nil {
		t.Skipf("redis servers not available: %v", startErr)
	}
}
