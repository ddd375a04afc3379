package bench

import (
	"context"
	"net"
	"sync/atomic"

	"google.golang.org/grpc"
)

// Counter counts the round trips of one implementation's clients: request
// turns on a connection (a write after a read, or the first write), or,
// on gRPC, each unary call and each message sent on a stream.
type Counter struct{ n atomic.Int64 }

// Load returns the round trips counted so far.
func (c *Counter) Load() int64 { return c.n.Load() }

// Dial opens a TCP connection that counts its request turns; it is the
// dial function given to padlock.WithDialer and to the client libraries.
func (c *Counter) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
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
