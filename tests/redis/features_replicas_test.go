package redis_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/padlocktest"
)

// wait_replicas=N runs WAIT after acquiring; with no replica to acknowledge,
// the lock is given back and Lock fails, leaving nothing behind.
func TestWaitReplicas(t *testing.T) {
	needServers(t)
	ctx := context.Background()
	h := newHarness(t, single, "redis", "wait_replicas=1")
	defer h.Close()
	l, err := h.NewLocker(ctx, padlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Lock(ctx, "replicated"); !errors.Is(err, padlock.ErrUnavailable) || !strings.Contains(err.Error(), "0 of 1 replicas") {
		t.Fatalf("Lock with wait_replicas=1 and no replica = %v, want ErrUnavailable naming the replica count", err)
	}
	if s, _ := h.State(ctx); len(s) != 0 {
		t.Errorf("a lock refused for want of replicas left %q", s)
	}
}

// sentinelNodes returns admin clients on the Sentinel server's primary
// and replica, whichever node is which now.
func sentinelNodes(t *testing.T) (primary, replica *goredis.Client, replicaNode *padlocktest.Node) {
	t.Helper()
	ctx := context.Background()
	for _, n := range sentinel.Nodes() {
		c := goredis.NewClient(&goredis.Options{Addr: n.Addr})
		t.Cleanup(func() { c.Close() })
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(info, "role:master") {
			primary = c
		} else {
			replica, replicaNode = c, n
		}
	}
	if primary == nil || replica == nil {
		t.Fatal("the Sentinel server has no primary and replica")
	}
	return primary, replica, replicaNode
}

// With wait_replicas, a Locker asks the replicas once for every
// acquisition that completed while its previous question was out, not
// once per acquisition: each WAIT blocks a pooled connection, and 32
// acquisitions at once, each with its own WAIT, left too few connections
// for the acquisitions and renewals on a loaded machine (the conformance
// suite's ManyLocks failed with "0 of 1 replicas acknowledged", Lock
// returning ErrNotHeld, and lost holds).
func TestReplicaWaitsShared(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	primary, _, _ := sentinelNodes(t)
	l, err := padlock.Open(ctx, sentinel.URL()+"?prefix=shared&wait_replicas=1")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const n = 64
	before := commandCalls(t, primary, "wait")
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			<-start
			lk, err := l.Lock(ctx, "n/"+strconv.Itoa(i))
			if err != nil {
				errs <- err
				return
			}
			errs <- lk.Unlock(ctx)
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	waits := commandCalls(t, primary, "wait") - before
	t.Logf("%d acquisitions at once, %d WAITs", n, waits)
	if waits < 1 || waits > n/2 {
		t.Errorf("%d WAITs for %d acquisitions at once: each WAIT must serve every acquisition that came while the one before was out", waits, n)
	}
}
