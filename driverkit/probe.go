package driverkit

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/padlock-go/padlock/backends"
)

// dialer returns d, or a net.Dialer's DialContext when d is nil.
func dialer(d backends.DialFunc) backends.DialFunc {
	if d == nil {
		return (&net.Dialer{}).DialContext
	}
	return d
}

// Probe dials addrs (host:port) over TCP with dial (nil: directly), each
// for at most half a second, and returns nil as soon as one accepts a
// connection, or every dial error joined. Drivers whose client library
// keeps the dial error to itself (or waits for a connection without saying
// why) use it to tell an outage, with its cause, from a slow server.
func Probe(ctx context.Context, dial backends.DialFunc, addrs []string) error {
	dial = dialer(dial)
	var errs []error
	for _, a := range addrs {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		c, err := dial(pctx, "tcp", a)
		cancel()
		if err == nil {
			c.Close()
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ProbeTLS is Probe with a TLS handshake (cfg; its ServerName defaults to
// each address's host) on every address that accepts a connection: it
// returns nil as soon as one completes a handshake the server does not
// refuse, else every error joined, a handshake's naming the address. It
// names the cause, such as an unknown certificate authority or an expired
// client certificate, that a client library reports as a connection that
// never becomes ready. A nil cfg is Probe.
func ProbeTLS(ctx context.Context, dial backends.DialFunc, addrs []string, cfg *tls.Config) error {
	if cfg == nil {
		return Probe(ctx, dial, addrs)
	}
	var errs []error
	for _, a := range addrs {
		err := handshake(ctx, dialer(dial), a, cfg)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func handshake(ctx context.Context, dial backends.DialFunc, addr string, cfg *tls.Config) error {
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c := cfg.Clone()
	if c.ServerName == "" {
		c.ServerName, _, _ = net.SplitHostPort(addr)
	}
	raw, err := dial(pctx, "tcp", addr)
	if err != nil {
		return err
	}
	conn := tls.Client(raw, c)
	defer conn.Close()
	if err := conn.HandshakeContext(pctx); err != nil {
		return fmt.Errorf("TLS handshake with %s: %w", addr, err)
	}
	// Under TLS 1.3 the server checks the client's certificate after the
	// client's side of the handshake is done, and says so in an alert:
	// wait briefly for one. A server that waits for the client to speak
	// first (gRPC, Redis) sends nothing, and the read times out.
	conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := conn.Read(make([]byte, 1)); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("TLS handshake with %s: %w", addr, err)
	}
	return nil
}
