package zookeeper_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
)

// A server that takes connections but grants no session (here a paused
// one: the kernel still accepts its connections) is ErrUnavailable with a
// message that says so. It said "%!w(<nil>)": the probe that names a
// refused connection found nothing wrong, and its nil was wrapped.
func TestOpenNoSession(t *testing.T) {
	needServers(t)
	if err := single.Pause(); err != nil {
		t.Fatal(err)
	}
	defer single.Resume()
	l, err := padlock.Open(context.Background(), "zk://"+single.Addrs()+"/nosession?dial_timeout=1s")
	if err == nil {
		l.Close()
		t.Fatal("Open succeeded against a paused server")
	}
	if !errors.Is(err, padlock.ErrUnavailable) || strings.Contains(err.Error(), "%!") || !strings.Contains(err.Error(), "no session") {
		t.Errorf("Open against a paused server: %v, want ErrUnavailable saying no session was granted", err)
	}
}

// A server that falls silent for a moment right after it made a session
// (a GC pause, a loaded machine) does not fail Open. Every connection here
// holds back the first answer after the session's for 500ms: longer than
// the 133ms a session of padlock.MinTTL (which Open asks for to learn the
// server's minimum) waits for one, shorter than the 6.7s a session of the
// default TTL (10s) waits. Open made the lock root on the
// shortest session and failed ("zk: connection closed"); it makes it on a
// session of the default TTL.
func TestOpenOnStalledServer(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &stallingConn{Conn: c}, nil
	}
	l, err := padlock.Open(ctx, "zk://"+single.Nodes()[0].Addr+"/stalled", padlock.WithDialer(dial))
	if err != nil {
		t.Fatalf("Open on a server that stalls for 500ms: %v", err)
	}
	defer l.Close()
	conformance.Cycle(ctx, t, l, "a")
}

// stallingConn delays its third read, the first after the two that read
// the server's answer to the session request, by 500ms.
type stallingConn struct {
	net.Conn
	reads atomic.Int64
}

func (c *stallingConn) Read(p []byte) (int, error) {
	if c.reads.Add(1) == 3 {
		time.Sleep(500 * time.Millisecond) // the stall under test, not a wait for a condition
	}
	return c.Conn.Read(p)
}

// Each misconfiguration fails Open within conformance.RefusalBound with
// ErrUnavailable or ErrInvalidOption and an error that names its cause;
// none leaves anything on the server, and no error or log line shows the
// digest's password.
func TestTLSErrors(t *testing.T) {
	srv, certs := startTLS(t)
	const password = "zk-Pw-4a7d"
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	tlsAddr, plainAddr := srv.Nodes()[0].Addr, single.Nodes()[0].Addr
	with := func(scheme, addr string, set url.Values, del ...string) string {
		q := tlsQuery(certs)
		q.Set("digest", "alice:"+password)
		for k, v := range set {
			q[k] = v
		}
		for _, k := range del {
			q.Del(k)
		}
		return (&url.URL{Scheme: scheme, Host: addr, Path: "/tls-refused", RawQuery: q.Encode()}).String()
	}
	seen := conformance.CheckRefused(t, []conformance.OpenCase{
		// A CA that did not sign the server's certificate.
		{URL: with("zks", tlsAddr, url.Values{"ca": {certs.OtherCA}}),
			Want: padlock.ErrUnavailable, Msg: "certificate signed by unknown authority"},
		// A server name the certificate does not carry.
		{URL: with("zks", tlsAddr, url.Values{"server_name": {"zk.example"}}),
			Want: padlock.ErrUnavailable, Msg: "zk.example"},
		// Plain text to the TLS port: the server closes the connection,
		// and the client names the likely cause once the dial timeout is
		// out (a server that is not serving yet closes connections too).
		{URL: with("zk", tlsAddr, url.Values{"dial_timeout": {"3s"}}, "ca", "cert", "key"),
			Want: padlock.ErrUnavailable, Msg: "a TLS port? that takes zks://"},
		// TLS to a plain port.
		{URL: with("zks", plainAddr, nil),
			Want: padlock.ErrUnavailable, Msg: "a plain port? that takes zk://"},
		// Files that are missing or do not go together.
		{URL: with("zks", tlsAddr, url.Values{"ca": {"/nonexistent/ca.pem"}}),
			Want: padlock.ErrInvalidOption, Msg: "ca=/nonexistent/ca.pem"},
		{URL: with("zks", tlsAddr, nil, "key"),
			Want: padlock.ErrInvalidOption, Msg: "cert= and key= go together"},
	}, padlock.WithLogger(logger))

	// An expired client certificate, and none where the server requires
	// one. Under TLS 1.3 the server judges the client's certificate after
	// the client's side of the handshake: Open waits a moment for its
	// alert, but on a loaded machine the alert may come later, and then
	// race the client's first write, which may meet the connection the
	// server reset instead (docs/security.md; as on the SQL servers).
	for _, c := range []struct{ what, url string }{
		{"an expired client certificate", with("zks", tlsAddr, url.Values{"cert": {certs.ExpiredCert}, "key": {certs.ExpiredKey}})},
		{"no client certificate", with("zks", tlsAddr, nil, "cert", "key")},
	} {
		start := time.Now()
		l, err := padlock.Open(context.Background(), c.url, padlock.WithLogger(logger))
		if err == nil {
			l.Close()
		}
		named := err != nil && (strings.Contains(err.Error(), "certificate") ||
			strings.Contains(err.Error(), "connection reset by peer") || strings.Contains(err.Error(), "broken pipe"))
		if !errors.Is(err, padlock.ErrUnavailable) || !named {
			t.Errorf("%s: Open = %v, want ErrUnavailable naming the certificate", c.what, err)
		} else {
			seen = append(seen, err.Error())
		}
		if d := time.Since(start); d > conformance.RefusalBound {
			t.Errorf("%s: Open took %v to fail", c.what, d)
		}
	}
	conformance.NoSecrets(t, strings.Join(seen, "\n")+"\n"+logs.String(), password)

	h := newTLSHarness(t, srv, certs, "")
	defer h.Close()
	if ok, _, err := h.inspect.Exists("/tls-refused"); err != nil || ok {
		t.Errorf("refused Opens made their lock root: %v, %v", ok, err)
	}
}

func TestOpenErrors(t *testing.T) {
	conformance.CheckOpenErrors(t, []conformance.OpenCase{
		{URL: "zk://127.0.0.1:1/p?bogus=1", Want: padlock.ErrInvalidOption, Msg: `"bogus" for zk:// (known: ttl, wait, digest, dial_timeout, request_timeout, password_file, password_env, ca, cert, key, server_name)`},
		{URL: "zk://127.0.0.1:1/p?digest=nocolon", Want: padlock.ErrInvalidOption, Msg: "user:password, or user with password_file="},
		{URL: "zk://127.0.0.1:1/p?digest=:s3cret", Want: padlock.ErrInvalidOption, Msg: "needs a user"},
		{URL: "zk://127.0.0.1:1/p?digest=alice:s3cret&password_env=PW", Want: padlock.ErrInvalidOption, Msg: "at once"},
		{URL: "zk://127.0.0.1:1/p?password_file=/tmp/pw", Want: padlock.ErrInvalidOption, Msg: "digest=user, which is missing"},
		{URL: "zk://127.0.0.1:1/p?digest=alice&password_file=/nonexistent/pw", Want: padlock.ErrInvalidOption, Msg: "password_file=/nonexistent/pw"},
		{URL: "zk://127.0.0.1:1/p?dial_timeout=soon", Want: padlock.ErrInvalidOption, Msg: "dial_timeout"},
		{URL: "zk:///p", Want: padlock.ErrInvalidURL, Msg: "host:port"},
		{URL: "zk://127.0.0.1:1,127.0.0.1:1/p", Want: padlock.ErrInvalidURL, Msg: "appears twice"},
		{URL: "zk://127.0.0.1:1/a/../b", Want: padlock.ErrInvalidURL, Msg: "clean absolute path"},
		{URL: "zk://127.0.0.1:1/p", Want: padlock.ErrUnavailable, Msg: "connection refused"},
		{URL: "zks://127.0.0.1:1/p", Want: padlock.ErrUnavailable, Msg: "connection refused"},
		{URL: "zks://127.0.0.1:1/p?cert=/tmp/c.pem", Want: padlock.ErrInvalidOption, Msg: "cert= and key= go together"},
		{URL: "zk://127.0.0.1:1/p?ca=/nonexistent/ca.pem", Want: padlock.ErrInvalidOption, Msg: "ca=/nonexistent/ca.pem"},
		{URL: "zks://127.0.0.1:1/a/../b", Want: padlock.ErrInvalidURL, Msg: "zks:// lock root"},
	})
}

// A client whose digest the lock root's ACL does not admit fails fast
// with ErrAccessDenied naming the cause, on a name in use and on a new
// one, and its password shows nowhere.
func TestDigestWrongUser(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The owner's password comes from the environment, the intruder's
	// from the URL.
	t.Setenv("PADLOCK_TEST_ZK_PW", "s3cret")
	h := newHarness(t, single, "digest=alice&password_env=PADLOCK_TEST_ZK_PW")
	t.Cleanup(func() { h.Close() })
	owner := h.open(t, ctx)
	lk, err := owner.Lock(ctx, "private")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(ctx)
	h.query = "digest=mallory:guess-9q"
	intruder := h.open(t, ctx)
	for _, name := range []string{"private", "fresh"} {
		start := time.Now()
		_, err := intruder.Lock(ctx, name)
		if !errors.Is(err, padlock.ErrAccessDenied) || !strings.Contains(err.Error(), "not authenticated") {
			t.Errorf("Lock(%q) by another digest user = %v, want ErrAccessDenied naming the refusal", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "guess-9q") {
			t.Errorf("the password shows in %v", err)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("Lock(%q) took %v to be refused", name, d)
		}
	}
	if !isOpen(lk.Done()) {
		t.Fatalf("the owner's hold was lost: %v", lk.Err())
	}
}
