package bench

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
)

// Counter counts the round trips of one implementation's clients: request
// turns on a connection (a write after a read, or the first write), or,
// on gRPC, each unary call and each message sent on a stream. It keeps
// the connections it dialled, so that Cut can take them away (E1's
// failover).
type Counter struct {
	n     atomic.Int64
	mu    sync.Mutex
	conns []net.Conn
	cut   bool
}

// errCut is a dial after Cut.
var errCut = errors.New("bench: this client's connections are cut")

// Cut closes every connection dialled so far and refuses every later
// dial: the client's process goes silent to its servers without a word
// (no release, no revoke), as if it had been killed.
func (c *Counter) Cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = true
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

// track dials a connection that Cut can close, without counting its
// turns (gRPC's are counted by GRPC's interceptors).
func (c *Counter) track(ctx context.Context, network, addr string) (net.Conn, error) {
	c.mu.Lock()
	cut := c.cut
	c.mu.Unlock()
	if cut {
		return nil, errCut
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		conn.Close()
		return nil, errCut
	}
	c.conns = append(c.conns, conn)
	return conn, nil
}

// Load returns the round trips counted so far.
func (c *Counter) Load() int64 { return c.n.Load() }

// Dial opens a TCP connection that counts its request turns; it is the
// dial function given to padlock.WithDialer and to the client libraries.
func (c *Counter) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := c.track(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, c: c}, nil
}

// countingConn counts a round trip at each write that follows a read:
// several writes before an answer (a pipeline, a request in pieces) are
// one turn, and messages the server pushes unasked are none.
type countingConn struct {
	net.Conn
	c       *Counter
	writing atomic.Bool
}

func (cc *countingConn) Write(p []byte) (int, error) {
	// Marked before the write: the answer may be read before Write
	// returns, and must end this turn, not be lost before it starts.
	if len(p) > 0 && !cc.writing.Swap(true) {
		cc.c.n.Add(1)
	}
	return cc.Conn.Write(p)
}

func (cc *countingConn) Read(p []byte) (int, error) {
	n, err := cc.Conn.Read(p)
	if n > 0 {
		cc.writing.Store(false)
	}
	return n, err
}

// GRPC returns dial options that count each unary call, and each message
// a stream sends, as a round trip (HTTP/2 frames are no measure of them).
func (c *Counter) GRPC() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return c.track(ctx, "tcp", addr) }),
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			c.n.Add(1)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, err
			}
			return &countingStream{ClientStream: s, c: c}, nil
		}),
	}
}

type countingStream struct {
	grpc.ClientStream
	c *Counter
}

func (s *countingStream) SendMsg(m any) error {
	s.c.n.Add(1)
	return s.ClientStream.SendMsg(m)
}
