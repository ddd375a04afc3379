package padlocktest_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/padlock-go/padlock/padlocktest"
)

// A silent proxy accepts connections on every link and swallows what
// they send: a reader gets no byte and no end, only its own deadline;
// Close ends the connections; Cut refuses new ones.
func TestSilent(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	if _, err := padlocktest.Silent(0); err == nil {
		t.Fatal("Silent(0) made a proxy of no link")
	}
	p, err := padlocktest.Silent(2)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	addrs := strings.Split(p.Addr(), ",")
	if len(addrs) != 2 {
		t.Fatalf("addresses %q, want two links", p.Addr())
	}
	var conns []net.Conn
	for _, a := range addrs {
		c, err := net.DialTimeout("tcp", a, 10*time.Second)
		if err != nil {
			t.Fatalf("dial %s: %v", a, err)
		}
		defer c.Close()
		conns = append(conns, c)
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			t.Fatalf("write to %s: %v", a, err)
		}
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if n, err := bufio.NewReader(c).Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("read from %s: %d bytes, %v; want nothing until the deadline", a, n, err)
		}
	}
	// Cut ends the connections and refuses new ones, as on any Proxy.
	p.Cut()
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(time.Minute))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
			t.Errorf("link %d after Cut: %v, want the connection closed", i, err)
		}
	}
	if c, err := net.DialTimeout("tcp", addrs[0], 10*time.Second); err == nil {
		c.Close()
		t.Error("a cut silent proxy accepted a connection")
	}
	// Close stops the sink behind the links: none of its goroutines
	// outlive it.
	p.Close()
	if err := goleak.Find(append(padlocktest.LeakIgnores(), ignore)...); err != nil {
		t.Errorf("after Close: %v", err)
	}
}

// isReset reports a connection the peer reset.
func isReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && strings.Contains(oe.Err.Error(), "reset")
}
