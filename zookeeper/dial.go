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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/padlock-go/padlock/driverkit"
)

// dialServer is go-zookeeper's dialer: the application's dial function
// (WithDialer) or a net.Dialer, each dial bounded by go-zookeeper's connect
// timeout and the driver's dial timeout, and with TLS (zks://, or ca=,
// cert=, key=, server_name=, WithTLSConfig) a handshake over what it
// returned. ZooKeeper's TLS port takes nothing before the handshake, so
// the handshake is part of the dial. go-zookeeper only logs why a
// connection failed and tries again: the driver notes it, for connect to
// report when no session comes in time.
//
// The server's answer to the session request must come within
// sessionTimeout over the number of servers, or minAnswerWait if that is
// longer (see watchedConn).
func (d *driver) dialServer(network, address string, timeout, sessionTimeout time.Duration) (net.Conn, error) {
	conn, err := d.dialOnce(network, address, timeout)
	if err != nil {
		d.failed.set(err, false)
		return nil, err
	}
	within := max(sessionTimeout/time.Duration(max(len(d.servers), 1)), minAnswerWait)
	return &watchedConn{Conn: conn, failed: &d.failed, answerWithin: within}, nil
}

// minAnswerWait is the least time a connection waits for the server's
// answer to its session request (unless go-zookeeper's own wait is
// shorter): a new session is a write the leader commits, which a loaded
// ensemble may take seconds to answer, and a server that is slow but
// answering must not be left for the next one, which is no faster.
const minAnswerWait = 3 * time.Second

func (d *driver) dialOnce(network, address string, timeout time.Duration) (net.Conn, error) {
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
	// are slow.
	hctx, hcancel := context.WithTimeout(context.Background(), d.dial)
	defer hcancel()
	conn := tls.Client(raw, serverName(d.tls, address))
	if err := conn.HandshakeContext(hctx); err != nil {
		raw.Close()
		return nil, fmt.Errorf("TLS handshake with %s: %w%s", address, err, tlsHint(err, true))
	}
	return conn, nil
}

// watchedConn notes the error that ends a connection before the server's
// first answer (to the session request): a server that closed it, such as
// a TLS port sent plain text, or one that never answered.
//
// It also bounds the wait for that answer by answerWithin: the session
// timeout over the number of servers (at least minAnswerWait), the time ZooKeeper's Java client
// gives a connection before it tries the next server, so that a session
// whose server stopped answering reaches another before it expires.
// go-zookeeper alone waits ten times its read timeout (6.7 times the
// session timeout), and a server that took the connection but never reads
// it holds the client that long: seen when a connection reached a
// restarted ZooKeeper while it started, which neither answered nor closed
// it. go-zookeeper then closes the connection and dials the next server.
type watchedConn struct {
	net.Conn
	failed       *connFailure
	answered     atomic.Bool
	answerWithin time.Duration
}

// SetReadDeadline is the connection's, brought forward to answerWithin
// from now until the server's first answer.
func (c *watchedConn) SetReadDeadline(t time.Time) error {
	if !c.answered.Load() && c.answerWithin > 0 {
		if bound := time.Now().Add(c.answerWithin); t.IsZero() || t.After(bound) {
			t = bound
		}
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.answered.Store(true)
	} else if err != nil && !c.answered.Load() && !errors.Is(err, net.ErrClosed) {
		c.failed.set(err, true) // not the client's own close
	}
	return n, err
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
	err := driverkit.ProbeTLS(ctx, d.dialFn, d.servers, d.tls)
	if err == nil || timedOut(err) {
		return nil
	}
	return driverkit.Unavailable("zookeeper "+strings.Join(d.servers, ","), fmt.Errorf("%w%s", err, tlsHint(err, true)))
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

// connFailure keeps the last reason a connection to a server made no
// session: a dial or TLS handshake error, or the error that ended a
// connection before the server answered.
type connFailure struct {
	mu        sync.Mutex
	err       error
	handshake bool // err ended a connection before the session's answer
	at        time.Time
}

func (f *connFailure) set(err error, handshake bool) {
	f.mu.Lock()
	f.err, f.handshake, f.at = err, handshake, time.Now()
	f.mu.Unlock()
}

// since returns the failure noted after t, if any.
func (f *connFailure) since(t time.Time) (err error, handshake bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil || f.at.Before(t) {
		return nil, false
	}
	return f.err, f.handshake
}

// cause is why connect got no session within the dial timeout: the last
// failure its attempts met (or, within a second before, another
// connect's), else whatever a probe finds, else that the servers accept
// connections but made no session in time (a slow or overloaded server).
func (d *driver) cause(ctx context.Context) error {
	err, handshake := d.failed.since(time.Now().Add(-d.dial - time.Second))
	switch {
	case err != nil && handshake && d.tls == nil:
		return fmt.Errorf("session handshake: %w%s", err, tlsHint(err, false))
	case err != nil && handshake:
		return fmt.Errorf("session handshake: %w", err)
	case err != nil:
		return err
	}
	if err := driverkit.Probe(ctx, d.dialFn, d.servers); err != nil {
		return err
	}
	return errors.New("the servers accept connections but made no session")
}
