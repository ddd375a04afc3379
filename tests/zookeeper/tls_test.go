package zookeeper_test

import (
	"context"
	"crypto/tls"
	"errors"
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
	cfg := (*tls.Config)(nil)
	if certs != nil {
		var err error
		if cfg, err = certs.ClientTLS(); err != nil {
			t.Fatal(err)
		}
	}
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		var (
			c   net.Conn
			err error
		)
		if cfg == nil {
			c, err = net.DialTimeout(network, addr, timeout)
		} else {
			c, err = tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, addr, cfg)
		}
		if err != nil {
			return nil, err
		}
		return &answerBound{Conn: c}, nil
	}
}

// answerBound gives the server 3 seconds to answer the inspector's session
// request, as the driver bounds its own sessions' wait (zookeeper/dial.go):
// go-zookeeper alone waits 66 seconds for a session of 10, and a
// restarted server was seen taking a connection while it started and
// never answering it. The inspector's requests waited behind it, and the
// suite's check for leftovers ran out of time.
type answerBound struct {
	net.Conn
	answered atomic.Bool
}

func (c *answerBound) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.answered.Store(true)
	}
	return n, err
}

func (c *answerBound) SetReadDeadline(t time.Time) error {
	if bound := time.Now().Add(3 * time.Second); !c.answered.Load() && (t.IsZero() || t.After(bound)) {
		t = bound
	}
	return c.Conn.SetReadDeadline(t)
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
		conformance.Cycle(ctx, t, l, "a")
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
