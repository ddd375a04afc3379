package zookeeper_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/padlocktest"
)

// A session whose reconnection reaches a server that takes the connection
// but never answers the session request goes on to another server in time,
// and lives: its lock stays held, Done open. A restarted ZooKeeper was seen
// doing this to a connection that reached it while it started, and
// go-zookeeper waited ten times its read timeout (66s for a session of
// 10s) for the answer, while the session expired. The driver bounds that
// wait by the session timeout over the number of servers, as ZooKeeper's
// Java client does. Here the session's connection is dropped, and the next
// dial, whichever server it is for, reaches a listener that reads the
// request and says nothing.
func TestSessionRequestUnanswered(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mute, err := padlocktest.Silent(1)
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	var (
		armed atomic.Bool // the next dial reaches the silent server
		mu    sync.Mutex
		conns []net.Conn // every connection to a real server
	)
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if armed.CompareAndSwap(true, false) {
			return (&net.Dialer{}).DialContext(ctx, network, mute.Addr())
		}
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
		return c, err
	}
	l, err := padlock.Open(ctx, "zk://"+ensemble.Addrs()+"/unanswered", padlock.WithDialer(dial))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lk, err := l.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(ctx)

	armed.Store(true)
	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	mu.Unlock()
	padlocktest.WaitFor(t, "a dial to the silent server", 30*time.Second, func() bool { return !armed.Load() })

	// The session is back (Holders goes over it), and it never ended.
	var hs []padlock.Holder
	padlocktest.WaitFor(t, "an answer over the session", 30*time.Second, func() bool {
		hs, err = l.Holders(ctx, "a")
		return err == nil
	})
	if len(hs) != 1 {
		t.Fatalf("holders of a: %v, want the one hold", hs)
	}
	select {
	case <-lk.Done():
		t.Fatalf("the hold ended while its session went to another server: %v", lk.Err())
	default:
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}
