package padlocktest

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// ephemeralLow is where the system's ephemeral port range begins.
func ephemeralLow() int {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			low, _ = strconv.Atoi(f[0])
		}
	}
	return low
}

// A proxy's port lies below the system's ephemeral range, so that nothing
// that asks the system for any port (an outgoing connection, a port-0
// listener) takes it while the proxy is Cut; and two proxies never share
// one. Restore then binds it again.
func TestProxyPortOutsideEphemeralRange(t *testing.T) {
	low := ephemeralLow()
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

// So does a server's port from FreePort, which a restarted server binds
// again; no two FreePort calls, nor a FreePort and a proxy, share one.
func TestFreePortOutsideEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	seen := map[int]bool{}
	for range 50 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if port >= low {
			t.Errorf("FreePort gave %d, in the ephemeral range (from %d)", port, low)
		}
		if seen[port] {
			t.Errorf("FreePort gave %d twice", port)
		}
		seen[port] = true
		// The port is free to bind, and stays reserved after.
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("bind FreePort's %d: %v", port, err)
		}
		l.Close()
	}
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	for range 20 {
		p, err := NewProxy(target.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		_, port, _ := net.SplitHostPort(p.Addr())
		if n, _ := strconv.Atoi(port); seen[n] {
			t.Errorf("a proxy got FreePort's port %d", n)
		}
	}
}
