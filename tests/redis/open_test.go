package redis_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/padlocktest/capture"
)

// A library writes nothing to its user's stderr: go-redis's pool errors
// about a server that is down go to padlock's logger (discarded unless
// WithLogger says otherwise).
func TestNothingOnStderr(t *testing.T) {
	ctx := context.Background()
	out := capture.Stderr(t, func() {
		for _, u := range []string{"redis://127.0.0.1:1/", "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/"} {
			if _, err := padlock.Open(ctx, u); !errors.Is(err, padlock.ErrUnavailable) {
				t.Errorf("Open(%q) = %v, want ErrUnavailable", u, err)
			}
		}
	})
	if strings.TrimSpace(out) != "" {
		t.Errorf("Open against servers that are down wrote to stderr:\n%s", out)
	}
}

func openURL(t *testing.T, ctx context.Context, u string) *padlock.Locker {
	t.Helper()
	l, err := padlock.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// A database number the server does not have (redis-server has 16 by
// default) is a mistake in the URL, with the server's words, not an
// outage: no retry mends it.
func TestOpenDatabaseOutOfRange(t *testing.T) {
	needServers(t)
	for _, u := range []string{"redis://" + single.Addrs() + "/99", "redis://" + single.Addrs() + "/?db=99"} {
		l, err := padlock.Open(context.Background(), u)
		if err == nil {
			l.Close()
			t.Errorf("Open(%s) succeeded", u)
			continue
		}
		if !errors.Is(err, padlock.ErrInvalidURL) || errors.Is(err, padlock.ErrUnavailable) || !strings.Contains(err.Error(), "DB index is out of range") {
			t.Errorf("Open(%s) = %v, want ErrInvalidURL with the server's words", u, err)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	conformance.CheckOpenErrors(t, []conformance.OpenCase{
		{URL: "redis://127.0.0.1:1/?bogus=1", Want: padlock.ErrInvalidOption, Msg: "bogus"},
		{URL: "redis://127.0.0.1:1/?fair=maybe", Want: padlock.ErrInvalidOption, Msg: "fair"},
		{URL: "redis://127.0.0.1:1/?wait_replicas=-1", Want: padlock.ErrInvalidOption, Msg: "wait_replicas"},
		{URL: "redis://127.0.0.1:1/?prefix=a{b", Want: padlock.ErrInvalidOption, Msg: "hash tags"},
		{URL: "redis://127.0.0.1:1/", Want: padlock.ErrUnavailable, Msg: "127.0.0.1:1"},
		{URL: "redis+cluster:///", Want: padlock.ErrInvalidURL, Msg: "host:port"},
		{URL: "redis+cluster://a:1,b/", Want: padlock.ErrInvalidURL, Msg: "invalid port"},
		{URL: "redis+cluster://a:1,:2/", Want: padlock.ErrInvalidURL, Msg: `":2"`},
		{URL: "redis+cluster://127.0.0.1:1/?wait_replicas=1", Want: padlock.ErrInvalidOption, Msg: "wait_replicas"},
		{URL: "redlock://127.0.0.1:1/?drift=0.9", Want: padlock.ErrInvalidOption, Msg: "drift"},
		{URL: "redlock://127.0.0.1:1/?fair=true", Want: padlock.ErrInvalidOption, Msg: "fair"},
		{URL: "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/", Want: padlock.ErrUnavailable, Msg: "quorum"},
		{URL: "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/", Want: padlock.ErrUnavailable, Msg: "connection refused"},
		{URL: "redis://127.0.0.1:1/", Want: padlock.ErrUnavailable, Msg: "connection refused"},
		// Duplicate hosts would count one server twice towards a quorum.
		{URL: "redlock://h:1,h:1,h:1/", Want: padlock.ErrInvalidURL, Msg: "h:1 appears twice"},
		{URL: "redlock://H:1,h:1,g:1/", Want: padlock.ErrInvalidURL, Msg: "appears twice"},
		{URL: "redis+cluster://a:1,a:1/", Want: padlock.ErrInvalidURL, Msg: "appears twice"},
		// Each scheme lists exactly the parameters it accepts.
		{URL: "redis://127.0.0.1:1/?bogus=1", Want: padlock.ErrInvalidOption, Msg: "known: ttl, wait, prefix, fair, wait_replicas, password_file, password_env, ca, cert, key, server_name, db,"},
		{URL: "rediss://127.0.0.1:1/?bogus=1", Want: padlock.ErrInvalidOption, Msg: "known: ttl, wait, prefix, fair, wait_replicas, password_file, password_env, ca, cert, key, server_name, db,"},
		{URL: "redis+cluster://127.0.0.1:1/?dial_timeout=1s", Want: padlock.ErrInvalidOption, Msg: `"dial_timeout" for redis+cluster:// (known: ttl, wait, prefix, fair, password_file, password_env, ca, cert, key, server_name)`},
		{URL: "redlock://127.0.0.1:1/?bogus=1", Want: padlock.ErrInvalidOption, Msg: "(known: ttl, wait, prefix, drift, password_file, password_env, ca, cert, key, server_name)"},
		{URL: "redis+sentinel://127.0.0.1:1/", Want: padlock.ErrInvalidURL, Msg: "the master's name as its path"},
		{URL: "redis+sentinel://127.0.0.1:1/a/b", Want: padlock.ErrInvalidURL, Msg: "the master's name as its path"},
		{URL: "redis+sentinel://127.0.0.1:1/m?bogus=1", Want: padlock.ErrInvalidOption, Msg: "(known: ttl, wait, prefix, fair, wait_replicas, sentinel_username, sentinel_password_env, dial_timeout,"},
		{URL: "redis+sentinel://127.0.0.1:1/m?sentinel_password_env=PADLOCK_TEST_UNSET_PW", Want: padlock.ErrInvalidOption, Msg: "$PADLOCK_TEST_UNSET_PW is not set"},
		{URL: "redis+sentinel://127.0.0.1:1/m?dial_timeout=soon", Want: padlock.ErrInvalidOption, Msg: "dial_timeout"},
		{URL: "redis+sentinel://127.0.0.1:1/m", Want: padlock.ErrUnavailable, Msg: "m via 127.0.0.1:1"},
		{URL: "rediss://127.0.0.1:1/?ca=/nonexistent/ca.pem", Want: padlock.ErrInvalidOption, Msg: "ca=/nonexistent/ca.pem"},
		{URL: "redis://127.0.0.1:1/?cert=/tmp/x.pem", Want: padlock.ErrInvalidOption, Msg: "cert= and key= go together"},
		{URL: "redis://u:s3cret@127.0.0.1:1/?password_file=/tmp/pw", Want: padlock.ErrInvalidOption, Msg: "password_file= and password_env= at once"},
		{URL: "redlock://127.0.0.1:1/?fair=false", Want: padlock.ErrInvalidOption, Msg: "no fair mode"},
		{URL: "redis://127.0.0.1:1/?prefix=a&prefix=b", Want: padlock.ErrInvalidOption, Msg: "2 times"},
		// A password never shows in an error.
		{URL: "redis://u:s3cret@127.0.0.1:1/?bogus=1", Want: padlock.ErrInvalidOption, Msg: "bogus"},
	})
	for _, u := range []string{"redis://u:s3cret@127.0.0.1:1/", "redlock://u:s3cret@127.0.0.1:1/", "redis://u:s3cret@127.0.0.1:1/%zz"} {
		if _, err := padlock.Open(context.Background(), u); err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) = %v: must fail without showing the password", u, err)
		}
	}
}

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

// Each misconfiguration fails fast with an error that names its cause, and
// leaves nothing on the server; no error or log line shows a password.
func TestTLSAndAuthErrors(t *testing.T) {
	c, r, _ := startTLS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	seen := conformance.CheckRefused(t, []conformance.OpenCase{
		// A CA that did not sign the server's certificate.
		{URL: strings.Replace(tlsURL(c, r, "padlock", tlsPassword, "tlserr", nil), url.QueryEscape(c.CA), url.QueryEscape(c.OtherCA), 1),
			Want: padlock.ErrUnavailable, Msg: "certificate"},
		// An expired client certificate.
		{URL: strings.NewReplacer(url.QueryEscape(c.ClientCert), url.QueryEscape(c.ExpiredCert),
			url.QueryEscape(c.ClientKey), url.QueryEscape(c.ExpiredKey)).Replace(tlsURL(c, r, "padlock", tlsPassword, "tlserr", nil)),
			Want: padlock.ErrUnavailable},
		{URL: tlsURL(c, r, "padlock", "not-"+tlsPassword, "tlserr", nil), Want: padlock.ErrAccessDenied, Msg: "WRONGPASS"},
		{URL: tlsURL(c, r, "padlock", tlsPassword, "tlserr", url.Values{"ca": {"/nonexistent/ca.pem"}}), Want: padlock.ErrInvalidOption, Msg: "ca=/nonexistent/ca.pem"},
	}, padlock.WithLogger(logger))

	// A user who may connect but not run padlock's scripts.
	reader, err := padlock.Open(ctx, tlsURL(c, r, "reader", readerPassword, "tlserr", nil), padlock.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	start := time.Now()
	if _, err := reader.Lock(ctx, "denied"); !errors.Is(err, padlock.ErrAccessDenied) || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("Lock without permission = %v, want ErrAccessDenied naming NOPERM", err)
	} else {
		seen = append(seen, err.Error())
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("Lock without permission took %v to fail", d)
	}
	admin := adminClient(t, c, r)
	defer admin.Close()
	if keys, err := admin.Keys(ctx, "tlserr:*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("refused calls left %q (%v)", keys, err)
	}

	conformance.NoSecrets(t, strings.Join(seen, "\n")+"\n"+logs.String(), tlsPassword, adminPassword, readerPassword)
}

// TestWithDialer opens every connection through the application's dial
// function, in plain text and over TLS (which go-redis then leaves to
// padlock: TLS must run over the connection the function returned), on a
// single server and on RedLock's masters.
func TestWithDialer(t *testing.T) {
	needServers(t)
	c, r, pwFile := startTLS(t)
	ctx := context.Background()
	for _, raw := range []string{
		single.URL() + "?prefix=dialer",
		tlsURL(c, r, "padlock", "", "tlsdialer", url.Values{"password_file": {pwFile}}),
		masters3.URL() + "?prefix=dialer",
	} {
		var dials atomic.Int64
		dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}
		l, err := padlock.Open(ctx, raw, padlock.WithDialer(dial))
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		conformance.Cycle(ctx, t, l, "dialed")
		l.Close()
		if dials.Load() == 0 {
			t.Errorf("%s: the dial function was never called", raw)
		}
	}
	if _, err := padlock.Open(ctx, single.URL(), padlock.WithDialer(nil)); !errors.Is(err, padlock.ErrInvalidOption) {
		t.Errorf("WithDialer(nil): %v, want ErrInvalidOption", err)
	}
}
