package driverkit_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/padlock-go/padlock/driverkit"
)

// refusedAddr returns a loopback address that refuses connections: a port
// the kernel handed out and that is closed again.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// serve accepts connections on a loopback port until the test ends, and
// hands each to handle (nil: close it at once).
func serve(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				if handle != nil {
					handle(c)
				}
			})
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

func TestProbe(t *testing.T) {
	ctx := context.Background()
	refused, listening := refusedAddr(t), serve(t, nil)

	err := driverkit.Probe(ctx, nil, []string{refused})
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Probe(refused) = %v, want the dial's connection refused", err)
	}
	if err := driverkit.Probe(ctx, nil, []string{listening}); err != nil {
		t.Errorf("Probe(listening) = %v", err)
	}
	// One address that answers is enough, whatever its place.
	if err := driverkit.Probe(ctx, nil, []string{refused, listening}); err != nil {
		t.Errorf("Probe(refused, listening) = %v", err)
	}
	// Every failure is reported, each with its address.
	other := refusedAddr(t)
	err = driverkit.Probe(ctx, nil, []string{refused, other})
	if err == nil || !strings.Contains(err.Error(), refused) || !strings.Contains(err.Error(), other) {
		t.Errorf("Probe(two refused) = %v, want both addresses named", err)
	}

	// The caller's dialer is used, not a direct dial.
	var dialed []string
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialed = append(dialed, addr)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	if err := driverkit.Probe(ctx, dial, []string{listening}); err != nil || len(dialed) != 1 || dialed[0] != listening {
		t.Errorf("Probe with a dialer = %v, dialed %q; want %s through it", err, dialed, listening)
	}
}

func TestProbeTLS(t *testing.T) {
	ctx := context.Background()
	p := newTestPKI(t)
	server := &tls.Config{Certificates: []tls.Certificate{p.pair}}
	addr := serve(t, func(c net.Conn) {
		tc := tls.Server(c, server)
		if tc.HandshakeContext(ctx) == nil {
			tc.Read(make([]byte, 1)) // until the client hangs up
		}
	})

	if err := driverkit.ProbeTLS(ctx, nil, []string{addr}, &tls.Config{RootCAs: p.pool}); err != nil {
		t.Errorf("ProbeTLS with the server's CA = %v", err)
	}
	// The cause a client library hides: a certificate nobody vouches for.
	err := driverkit.ProbeTLS(ctx, nil, []string{addr}, &tls.Config{RootCAs: newTestPKI(t).pool})
	var unknown x509.UnknownAuthorityError
	if err == nil || !strings.Contains(err.Error(), "TLS handshake with "+addr) || !errors.As(err, &unknown) {
		t.Errorf("ProbeTLS with another CA = %v, want the handshake's unknown authority, naming %s", err, addr)
	}
	// A listening port that does not speak TLS is not reachable either.
	plain := serve(t, nil)
	if err := driverkit.ProbeTLS(ctx, nil, []string{plain}, &tls.Config{RootCAs: p.pool}); err == nil {
		t.Error("ProbeTLS against a port that closes at once = nil")
	}
	// nil cfg is Probe: a plain listener is enough.
	if err := driverkit.ProbeTLS(ctx, nil, []string{plain}, nil); err != nil {
		t.Errorf("ProbeTLS(nil cfg) = %v, want Probe's nil", err)
	}
}
