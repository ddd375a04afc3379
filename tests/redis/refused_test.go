package redis_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/padlocktest"
)

// refusedAddr is a loopback port nothing listens on: a dial is refused.
const refusedAddr = "127.0.0.1:1"

// cutDialer is a padlock.WithDialer function that counts dials per
// address and can take servers away: Cut closes every connection to them
// and sends later dials to refusedAddr, which the kernel refuses, as it
// does when a server is down.
type cutDialer struct {
	mu    sync.Mutex
	dials map[string]int
	conns map[string][]net.Conn
	cut   func(addr string) bool
}

func newCutDialer() *cutDialer {
	return &cutDialer{dials: map[string]int{}, conns: map[string][]net.Conn{}}
}

func (d *cutDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.dials[addr]++
	to := addr
	if d.cut != nil && d.cut(addr) {
		to = refusedAddr
	}
	d.mu.Unlock()
	conn, err := (&net.Dialer{}).DialContext(ctx, network, to)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.conns[addr] = append(d.conns[addr], conn)
	d.mu.Unlock()
	return conn, nil
}

// Cut takes away the servers whose address which reports, and returns
// how many connections it closed.
func (d *cutDialer) Cut(which func(addr string) bool) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut = which
	n := 0
	for addr, cs := range d.conns {
		if which(addr) {
			for _, c := range cs {
				c.Close()
				n++
			}
			delete(d.conns, addr)
		}
	}
	return n
}

// counts returns a copy of the dials per address, and their total.
func (d *cutDialer) counts() (map[string]int, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out, total := map[string]int{}, 0
	for a, n := range d.dials {
		out[a], total = n, total+n
	}
	return out, total
}

// maxDialsPerAddr bounds how often one call may dial one refusing
// address: once per connection it needs, never again for a retry. (A
// cluster client may dial a node once to learn the slots and once more
// for the command.) go-redis's defaults dialed 5 times per connection,
// 100ms apart, and retried the command 3 more times: 20 dials per
// address, 1.7s for Open.
const maxDialsPerAddr = 2

// checkRefused checks that err is ErrUnavailable carrying the dial error,
// and that no address was dialed more than maxDialsPerAddr times since
// before (a copy of the counts then).
func checkRefused(t *testing.T, what string, err error, d *cutDialer, before map[string]int) {
	t.Helper()
	var op *net.OpError
	if !errors.Is(err, padlock.ErrUnavailable) || !errors.As(err, &op) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("%s: %v, want ErrUnavailable carrying the refused dial (*net.OpError)", what, err)
	}
	after, _ := d.counts()
	for addr, n := range after {
		if n-before[addr] > maxDialsPerAddr {
			t.Errorf("%s: dialed %s %d times; a refused dial must not be retried (at most %d)", what, addr, n-before[addr], maxDialsPerAddr)
		}
	}
}

// A refused port is ErrUnavailable at once on every Redis scheme: Open
// dials each address once, and does not retry a refused dial.
func TestRefusedOpen(t *testing.T) {
	for _, u := range []string{
		"redis://" + refusedAddr + "/",
		"rediss://" + refusedAddr + "/",
		"redis+cluster://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/",
		"redis+sentinel://127.0.0.1:1,127.0.0.1:2/mymaster",
		"redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/",
	} {
		d := newCutDialer()
		start := time.Now()
		l, err := padlock.Open(context.Background(), u, padlock.WithDialer(d.dial))
		if err == nil {
			l.Close()
			t.Errorf("Open(%s) succeeded", u)
			continue
		}
		counts, _ := d.counts()
		t.Logf("Open(%s): %v, dials %v: %v", u, time.Since(start).Round(time.Microsecond), counts, err)
		checkRefused(t, "Open("+u+")", err, d, nil)
	}
}

// A server that goes away under an open Locker is ErrUnavailable at once
// too, on TryLock, Lock and Unlock: the dial that finds it down is not
// retried (Sentinel: the primary goes, the Sentinel stays).
func TestServerGoneFailsFast(t *testing.T) {
	needServers(t)
	for _, tc := range []struct {
		name string
		url  string
		cut  func(addr string) bool // which addresses go
	}{
		{"single", "redis://" + single.Addrs() + "/?prefix=gone", all},
		{"cluster", cluster.URL() + "/?prefix=gone", all},
		{"sentinel", sentinel.URL() + "?prefix=gone", func(addr string) bool { return addr != sentinel.Sentinels()[0].Addr }},
		{"redlock", masters3.URL() + "/?prefix=gone", all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			d := newCutDialer()
			l, err := padlock.Open(ctx, tc.url, padlock.WithDialer(d.dial))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			held, err := l.Lock(ctx, "held")
			if err != nil {
				t.Fatal(err)
			}
			if d.Cut(tc.cut) == 0 {
				t.Fatal("no connection to cut")
			}
			before, _ := d.counts()
			_, err = l.TryLock(ctx, "free")
			checkRefused(t, "TryLock", err, d, before)
			before, _ = d.counts()
			_, err = l.Lock(ctx, "free", padlock.WithWait(time.Minute))
			checkRefused(t, "Lock", err, d, before)
			before, _ = d.counts()
			err = held.Unlock(ctx)
			checkRefused(t, "Unlock", err, d, before)
		})
	}
}

func all(string) bool { return true }

// go-redis still retries what a live server needs retried: a request
// whose connection broke after the server ran it is sent again on a
// fresh connection, and the Lock it belongs to succeeds (the acquire
// script recognises its own retried run).
func TestBrokenConnectionRetried(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := single.Proxy(t)
	l, err := padlock.Open(ctx, "redis://"+p.Addr()+"/?prefix=broken")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// Once first, so that the server has the script (EVALSHA runs it, and
	// does not answer NOSCRIPT) and the client a connection.
	lk, err := l.TryLock(ctx, "warm")
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Drop the answers: the acquire script runs, its answer never comes.
	heal, err := p.DropAnswers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		lk, err := l.TryLock(ctx, "retried")
		if err == nil {
			err = lk.Unlock(ctx)
		}
		done <- err
	}()
	admin := goredis.NewClient(&goredis.Options{Addr: single.Nodes()[0].Addr})
	defer admin.Close()
	padlocktest.WaitFor(t, "the acquire script ran", 30*time.Second, func() bool {
		keys, _ := admin.Keys(ctx, "broken:*:lock").Result()
		return len(keys) > 0
	})
	// Heal: the proxy closes the connection the answer was lost on.
	if err := heal(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("TryLock whose connection broke after the script ran: %v; go-redis must retry it on a fresh connection", err)
	}
}

// BenchmarkRefusedOpen times Open against refused ports, the number
// docs/redis.md quotes (go-redis's own retries made it 1.7s on redis://).
func BenchmarkRefusedOpen(b *testing.B) {
	for _, u := range []string{
		"redis://" + refusedAddr + "/",
		"redis+cluster://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/",
		"redis+sentinel://127.0.0.1:1,127.0.0.1:2/mymaster",
		"redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/",
	} {
		b.Run(strings.SplitN(u, ":", 2)[0], func(b *testing.B) {
			for b.Loop() {
				if l, err := padlock.Open(context.Background(), u); err == nil {
					l.Close()
					b.Fatalf("Open(%s) succeeded", u)
				}
			}
		})
	}
}
