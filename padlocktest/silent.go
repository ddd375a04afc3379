package padlocktest

import (
	"io"
	"net"
	"sync"
)

// Silent starts a Proxy of n links in front of no server: each accepts
// connections and swallows every byte, never answering and never closing
// a connection, as a host whose server hangs does (or a firewall that
// drops a path's packets once connections are up). A client opened on its
// Addr sees no error, only silence, and must give up by its own
// timeouts. Unlike Blackhole on a proxy in front of a real server, it
// holds nothing on the server (PostgreSQL would keep a process for each
// connection until its authentication timeout). Cut and Restore work on
// it as on any Proxy; Close it when done.
func Silent(n int) (*Proxy, error) {
	if n < 1 {
		return nil, errNoNode
	}
	s, err := newSink()
	if err != nil {
		return nil, err
	}
	up := make([]string, n)
	for i := range up {
		up[i] = s.ln.Addr().String()
	}
	p, err := NewProxy(up...)
	if err != nil {
		s.close()
		return nil, err
	}
	p.sink = s
	return p, nil
}

// sink accepts connections on loopback and reads everything they send,
// answering nothing, until close.
type sink struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	done  bool
}

func newSink() (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &sink{ln: ln, conns: map[net.Conn]struct{}{}}
	s.wg.Go(s.accept)
	return s, nil
}

func (s *sink) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		s.mu.Lock()
		if s.done {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Go(func() {
			io.Copy(io.Discard, c) // until the peer or close ends it
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			c.Close()
		})
	}
}

// close stops accepting, closes every connection and waits for the
// sink's goroutines to end.
func (s *sink) close() {
	s.mu.Lock()
	s.done = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.ln.Close()
	s.wg.Wait()
}
