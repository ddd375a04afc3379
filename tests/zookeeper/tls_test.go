package zookeeper_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/padlocktest"
)

// startTLS starts a standalone ZooKeeper for one test that takes clients
// on its TLS port only (padlocktest.TLS: Netty's secureClientPort) and
// requires a client certificate from the test CA.
func startTLS(t *testing.T) (*padlocktest.Server, *padlocktest.Certs) {
	t.Helper()
	needServers(t)
	certs := padlocktest.NewCerts(t)
	return padlocktest.Start(t, padlocktest.ZooKeeper, padlocktest.TLS(certs)), certs
}

// tlsQuery is padlock's TLS parameters for the test CA and client
// certificate.
func tlsQuery(c *padlocktest.Certs) url.Values {
	return url.Values{"ca": {c.CA}, "cert": {c.ClientCert}, "key": {c.ClientKey}}
}

// inspectorDialer is the dialer of a test's own go-zookeeper client: over
// TLS with the test's client certificate when certs is set.
func inspectorDialer(t *testing.T, certs *padlocktest.Certs) zk.Dialer {
	if certs == nil {
		return net.DialTimeout
	}
	cfg, err := certs.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, addr, cfg)
	}
}

// The conformance suite, faults included (the harness's proxies pass TLS
// through), over mutual TLS, with digest auth whose password is read from
// a file.
func TestConformanceTLS(t *testing.T) {
	srv, certs := startTLS(t)
	pwFile := padlocktest.SecretFile(t, "zk-tls-Pw-81c2")
	runSuite(t, srv, certs, url.Values{"digest": {"padlock"}, "password_file": {pwFile}}.Encode())
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

// A tls.Config the application built (padlock.WithTLSConfig) stands in
// for the URL's certificate files, and TLS runs over the application's
// dial function (padlock.WithDialer): the server takes nothing else. The
// URL's TLS parameters also make zk:// speak TLS, as on the other
// backends.
func TestTLSConfigAndDialer(t *testing.T) {
	srv, certs := startTLS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := certs.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	cfg.ServerName = "" // the host dialed is verified
	var dials atomic.Int64
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	addr := srv.Nodes()[0].Addr
	for _, c := range []struct {
		url  string
		opts []padlock.OpenOption
	}{
		{"zks://" + addr + "/tls-own", []padlock.OpenOption{padlock.WithTLSConfig(cfg), padlock.WithDialer(dial)}},
		{"zk://" + addr + "/tls-params?" + tlsQuery(certs).Encode() + "&server_name=localhost", nil},
	} {
		before := dials.Load()
		l, err := padlock.Open(ctx, c.url, c.opts...)
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		lk, err := l.Lock(ctx, "a")
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if n := dials.Load() - before; c.opts != nil && n == 0 {
			t.Errorf("%s: no connection went through WithDialer", c.url)
		}
	}
	// Without a client certificate the server refuses the connection.
	if _, err := padlock.Open(ctx, "zks://"+addr+"/tls-own?ca="+url.QueryEscape(certs.CA)); !errors.Is(err, padlock.ErrUnavailable) || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Open without a client certificate = %v, want ErrUnavailable naming it", err)
	}
}
