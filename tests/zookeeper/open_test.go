package zookeeper_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
)

// A server that falls silent for a moment right after it made a session
// (a GC pause, a loaded machine) does not fail Open. Every connection here
// holds back the first answer after the session's for 500ms: longer than
// the 133ms a session of padlock.MinTTL (which Open asks for to learn the
// server's minimum) waits for one, shorter than the 1.3s a 2s session
// (the test server's longest) waits. Open made the lock root on the
// shortest session and failed ("zk: connection closed"); it makes it on a
// session of the default TTL.
func TestOpenOnStalledServer(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &stallingConn{Conn: c}, nil
	}
	l, err := padlock.Open(ctx, "zk://"+single.Nodes()[0].Addr+"/stalled", padlock.WithDialer(dial))
	if err != nil {
		t.Fatalf("Open on a server that stalls for 500ms: %v", err)
	}
	defer l.Close()
	lk, err := l.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// stallingConn delays its third read, the first after the two that read
// the server's answer to the session request, by 500ms.
type stallingConn struct {
	net.Conn
	reads atomic.Int64
}

func (c *stallingConn) Read(p []byte) (int, error) {
	if c.reads.Add(1) == 3 {
		time.Sleep(500 * time.Millisecond) // the stall under test, not a wait for a condition
	}
	return c.Conn.Read(p)
}
