package zookeeper

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/padlock-go/padlock/backends"
)

// dialServer is go-zookeeper's dialer: the application's dial function
// (WithDialer) or a net.Dialer, each dial bounded by go-zookeeper's connect
// timeout and the driver's dial timeout, and with TLS (zks://, or ca=,
// cert=, key=, server_name=, WithTLSConfig) a handshake over what it
// returned. ZooKeeper's TLS port takes nothing before the handshake, so
// the handshake is part of the dial: a failed one is a dial error, which
// go-zookeeper logs and connect reports.
func (d *driver) dialServer(network, address string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), min(timeout, d.dial))
	defer cancel()
	var (
		raw net.Conn
		err error
	)
	if d.dialFn != nil {
		raw, err = d.dialFn(ctx, network, address)
	} else {
		raw, err = (&net.Dialer{}).DialContext(ctx, network, address)
	}
	if err != nil || d.tls == nil {
		return raw, err
	}
	// The handshake gets the whole dial timeout: a JVM's first handshakes
	// are slow, and go-zookeeper's own wait for a session's answer is
	// longer still.
	hctx, hcancel := context.WithTimeout(context.Background(), d.dial)
	defer hcancel()
	conn := tls.Client(raw, serverName(d.tls, address))
	if err := conn.HandshakeContext(hctx); err != nil {
		raw.Close()
		return nil, fmt.Errorf("TLS handshake with %s: %w%s", address, err, tlsHint(err, true))
	}
	return conn, nil
}

// serverName is cfg, or a clone of it that verifies address's host when
// cfg names no server: each server of an ensemble verifies its own name.
func serverName(cfg *tls.Config, address string) *tls.Config {
	if cfg.ServerName != "" {
		return cfg
	}
	c := cfg.Clone()
	c.ServerName, _, _ = net.SplitHostPort(address)
	return c
}

// probeTLS completes a TLS handshake with every server, so that Open
// fails at once, naming the cause, when none accepts one: an unknown
// certificate authority, a refused client certificate, a plain port. Only
// Open probes so: it waits a moment for the server's verdict on the
// client's certificate, which later sessions, on a Lock's clock, cannot
// spare (their dials report the same causes, if it changed meanwhile). A
// probe that only ran out of time proves nothing (a loaded JVM's first
// handshakes are slow): Open then waits for a session as usual.
func (d *driver) probeTLS(ctx context.Context) error {
	err := backends.ProbeTLS(ctx, d.dialFn, d.servers, d.tls)
	if err == nil || timedOut(err) {
		return nil
	}
	return backends.Unavailable("zookeeper "+strings.Join(d.servers, ","), fmt.Errorf("%w%s", err, tlsHint(err, true)))
}

// timedOut reports whether err is only a probe running out of time.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.As(err, &ne) && ne.Timeout()
}

// tlsHint names the likely cause of a connection the server closed before
// a TLS handshake, or a session, was made: a plain ZooKeeper port closes a
// connection that starts with a TLS handshake (it reads a length far over
// its limit), and a TLS port closes one that starts in plain text. A
// server that is not serving yet closes connections too, hence a question.
func tlsHint(err error, overTLS bool) string {
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, syscall.ECONNRESET) {
		return ""
	}
	if overTLS {
		return " (the server closed the connection during the TLS handshake: a plain port? that takes zk://)"
	}
	return " (the server closed the connection before making a session: a TLS port? that takes zks://)"
}

// connFailure keeps the last reason go-zookeeper gave for a connection
// that made no session (a dial or TLS handshake error, or a connection
// closed before the server answered), which it only logs: connect reports
// it when no session comes in time.
type connFailure struct {
	mu        sync.Mutex
	err       error
	handshake bool // err ended a connection before the session's answer
}

// record reads one of go-zookeeper's log lines for a failed connection.
func (f *connFailure) record(format string, args []any) {
	var (
		err       error
		handshake bool
	)
	switch {
	case format == "failed to connect to %s: %v" && len(args) == 2:
		if e, ok := args[1].(error); ok {
			err = fmt.Errorf("%v: %w", args[0], e)
		}
	case format == "authentication failed: %s" && len(args) == 1:
		if e, ok := args[0].(error); ok && !errors.Is(e, zk.ErrSessionExpired) {
			err, handshake = e, true
		}
	}
	if err != nil {
		f.mu.Lock()
		f.err, f.handshake = err, handshake
		f.mu.Unlock()
	}
}

// cause is why connect got no session: the last failure go-zookeeper
// logged, else whatever a probe finds, else that the servers accept
// connections but made no session in time (a slow or overloaded server).
func (d *driver) cause(ctx context.Context, f *connFailure) error {
	f.mu.Lock()
	err, handshake := f.err, f.handshake
	f.mu.Unlock()
	switch {
	case err != nil && handshake && d.tls == nil:
		return fmt.Errorf("session handshake: %w%s", err, tlsHint(err, false))
	case err != nil && handshake:
		return fmt.Errorf("session handshake: %w", err)
	case err != nil:
		return err
	}
	if err := backends.Probe(ctx, d.dialFn, d.servers); err != nil {
		return err
	}
	return errors.New("the servers accept connections but made no session")
}
