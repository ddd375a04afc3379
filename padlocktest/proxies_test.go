package padlocktest_test

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	_ "github.com/padlock-go/padlock/memory"
	"github.com/padlock-go/padlock/padlocktest"
)

// echoServer accepts connections on loopback and echoes each line back,
// until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					c.Write(append(sc.Bytes(), '\n'))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// echoes reports whether a line sent through addr comes back.
func echoes(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "ping\n"
}

// Proxies cuts one Locker's proxies and no other's, restores them, and
// closes them all.
func TestProxies(t *testing.T) {
	ctx := context.Background()
	upstream := echoServer(t)
	var x padlocktest.Proxies
	var ls []*padlock.Locker
	for range 2 {
		ps, err := padlocktest.ProxyEach(upstream, upstream)
		if err != nil {
			t.Fatal(err)
		}
		// Open makes the URL from the proxies' addresses: a mem:// store
		// named after them stands in for a server.
		var named string
		l, err := x.Open(ctx, func(addrs string) string { named = addrs; return "mem://proxies" }, ps)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if named != ps[0].Addr()+","+ps[1].Addr() {
			t.Errorf("Open's URL got %q, want both proxies' addresses", named)
		}
		ls = append(ls, l)
	}
	a, b := x.Of(ls[0]), x.Of(ls[1])
	if len(a) != 2 || len(b) != 2 {
		t.Fatalf("Of: %d and %d proxies, want 2 each", len(a), len(b))
	}
	for _, p := range append(a, b...) {
		padlocktest.WaitFor(t, "an echo through "+p.Addr(), time.Minute, func() bool { return echoes(p.Addr()) })
	}

	restore := x.Cut(ls[0])
	for _, p := range a {
		if echoes(p.Addr()) {
			t.Errorf("%s echoes after Cut", p.Addr())
		}
	}
	for _, p := range b {
		if !echoes(p.Addr()) {
			t.Errorf("%s, another Locker's proxy, stopped echoing", p.Addr())
		}
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	for _, p := range a {
		padlocktest.WaitFor(t, "an echo through "+p.Addr()+" after restore", time.Minute, func() bool { return echoes(p.Addr()) })
	}

	silent, err := padlocktest.ProxyEach(upstream)
	if err != nil {
		t.Fatal(err)
	}
	x.Keep(nil, silent...) // no Locker's, closed all the same
	x.Close()
	for _, p := range append(append(a, b...), silent...) {
		if echoes(p.Addr()) {
			t.Errorf("%s echoes after Close", p.Addr())
		}
	}
}
