package padlocktest

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// A proxy's port lies below the system's ephemeral range, so that nothing
// that asks the system for any port (an outgoing connection, a port-0
// listener) takes it while the proxy is Cut; and two proxies never share
// one. Restore then binds it again.
func TestProxyPortOutsideEphemeralRange(t *testing.T) {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			low, _ = strconv.Atoi(f[0])
		}
	}
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	seen := map[string]bool{}
	var ps []*Proxy
	defer func() {
		for _, p := range ps {
			p.Close()
		}
	}()
	for range 20 {
		p, err := NewProxy(target.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
		_, port, _ := net.SplitHostPort(p.Addr())
		if n, _ := strconv.Atoi(port); n >= low {
			t.Errorf("proxy port %d is in the ephemeral range (from %d)", n, low)
		}
		if seen[port] {
			t.Errorf("two proxies on port %s", port)
		}
		seen[port] = true
	}
	p := ps[0]
	p.Cut()
	// Anything asking for a port now gets one of the ephemeral range.
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if l.Addr().String() == p.Addr() {
			t.Errorf("a port-0 listener got the cut proxy's port %s", p.Addr())
		}
		l.Close()
	}
	if err := p.Restore(); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatalf("dial the restored proxy: %v", err)
	}
	c.Close()
}
