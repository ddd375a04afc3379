package zookeeper_test

import (
	"context"
	"io"
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
	mute := newMuteServer(t)
	var (
		armed atomic.Bool // the next dial reaches the mute server
		mu    sync.Mutex
		conns []net.Conn // every connection to a real server
	)
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if armed.CompareAndSwap(true, false) {
			addr = mute.addr()
		}
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil && addr != mute.addr() {
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
	padlocktest.WaitFor(t, "a session request at the mute server", 30*time.Second, func() bool { return mute.requests() > 0 })

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

// muteServer accepts connections and reads them, and never writes.
type muteServer struct {
	l    net.Listener
	read atomic.Int64 // connections that sent bytes
	wg   sync.WaitGroup
}

func newMuteServer(t *testing.T) *muteServer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &muteServer{l: l}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				buf := make([]byte, 1)
				if _, err := io.ReadFull(c, buf); err == nil {
					m.read.Add(1)
				}
				io.Copy(io.Discard, c)
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		m.wg.Wait()
	})
	return m
}

func (m *muteServer) addr() string    { return m.l.Addr().String() }
func (m *muteServer) requests() int64 { return m.read.Load() }
