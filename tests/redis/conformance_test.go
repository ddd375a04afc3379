package redis_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/padlocktest"
)

func runSuite(t *testing.T, g func() *padlocktest.Server, scheme, query string, isCluster bool, ttl time.Duration) {
	needServers(t)
	var prefixesUsed []string
	conformance.Run(t, func(t *testing.T) conformance.Harness {
		h := newHarness(t, g(), scheme, query)
		h.restart = g().Restart // a cluster's Restart waits for cluster_state:ok
		h.ttl = ttl
		prefixesUsed = append(prefixesUsed, h.prefix)
		return h
	}, conformance.Promises(promisedFor(scheme, strings.Contains(query, "fair=true"))))
	t.Run("NoKeyWithoutTTL", func(t *testing.T) { noKeyWithoutTTL(t, g(), prefixesUsed) })
}

// promisedFor is what a configuration promises (docs/guarantees.md,
// docs/redis.md): the suite fails a Locker that reports other
// Capabilities. One server, a Cluster and Sentinel: AP, tokens monotonic
// until a failover or restart, fair FIFO in fair mode; RedLock: no fair
// queue, and no monotonic tokens (each master counts its own).
func promisedFor(scheme string, fair bool) padlock.Capabilities {
	if scheme == "redlock" {
		return padlock.Capabilities{Consistency: padlock.AP, PushWakeup: true, DoneBeforeRegrant: true,
			SharedLocks: true, Limits: true, Elections: true}
	}
	return padlock.Capabilities{Consistency: padlock.AP, FairFIFO: fair, MonotonicTokens: true,
		PushWakeup: true, DoneBeforeRegrant: true, SharedLocks: true, Limits: true, Elections: true}
}

// noKeyWithoutTTL checks that, after the suite, every key padlock wrote has
// an expiry, except the fencing counters, which are persistent on purpose.
func noKeyWithoutTTL(t *testing.T, g *padlocktest.Server, prefixes []string) {
	ctx := context.Background()
	seen := 0
	for _, n := range g.Nodes() {
		a := goredis.NewClient(&goredis.Options{Addr: n.Addr})
		for _, p := range prefixes {
			iter := a.Scan(ctx, 0, p+":*", 1000).Iterator()
			for iter.Next(ctx) {
				seen++
				key := iter.Val()
				if strings.HasSuffix(key, ":fence") {
					continue
				}
				if ttl := a.PTTL(ctx, key).Val(); ttl < 0 {
					t.Errorf("key %s has no expiry (PTTL %v)", key, ttl)
				}
			}
		}
		a.Close()
	}
	if seen == 0 && len(prefixes) > 10 {
		t.Error("the whole suite left no fencing counters: the scan looked in the wrong place")
	}
}

// Fair mode on one server, without TLS: WatchHolders runs here, which
// TLS's least-privileged user may not run. Non-fair mode on one server
// runs the suite over TLS (TestConformanceTLS) and behind Sentinel
// (TestConformanceSentinel, WatchHolders included), not a third time
// here.
func TestConformanceSingleFair(t *testing.T) {
	runSuite(t, func() *padlocktest.Server { return single }, "redis", "fair=true", false, 2*time.Second)
}

func TestConformanceCluster(t *testing.T) {
	runSuite(t, func() *padlocktest.Server { return cluster }, "redis+cluster", "fair=true", true, 2*time.Second)
}

// A primary and its replica behind Redis Sentinel, with each acquisition
// waiting for the replica (wait_replicas=1).
func TestConformanceSentinel(t *testing.T) {
	runSuite(t, func() *padlocktest.Server { return sentinel }, "redis+sentinel", "wait_replicas=1", false, 2*time.Second)
}

func TestConformanceRedLock(t *testing.T) {
	// Every RedLock renewal is a round trip to each master: 1,000 holds need
	// a longer lease than one instance does on a loaded 2-core machine.
	runSuite(t, func() *padlocktest.Server { return masters3 }, "redlock", "", false, 3*time.Second)
}

// The conformance suite over TLS with mutual certificates, faults
// included, as a user whose ACL is exactly the least privilege
// docs/security.md lists.
func TestConformanceTLS(t *testing.T) {
	c, r, pwFile := startTLS(t)
	n := 0
	for _, fair := range []string{"false", "true"} {
		t.Run("fair="+fair, func(t *testing.T) {
			conformance.Run(t, func(t *testing.T) conformance.Harness {
				n++
				return newTLSHarness(t, c, r, pwFile, fmt.Sprintf("tls%d", n), fair)
			}, conformance.Promises(promisedFor("redis", fair == "true")))
		})
	}
}
