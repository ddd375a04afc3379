package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"time"

	"github.com/padlock-go/padlock/backends"
)

// A refused port must be reported at once, as the other backends do. Left
// to itself, go-redis dials a connection up to five times, 100ms apart
// (DialerRetries), and retries each command whose connection could not be
// dialed up to three more times (MaxRetries), each time after a back-off:
// a refused port cost Open 1.7s and TryLock 2.7s, and Sentinel (one
// failing lookup per Sentinel per dial) ran into Open's own 5s bound. A
// server that refuses a connection, or cannot be reached within the dial
// timeout, is down; trying again within the same call only delays the
// answer, and the renewal loop and the janitor retry on their own schedule.
//
// So padlock dials once per connection (DialerRetries: 1), and hands
// go-redis its dial failures as dialError, which go-redis does not take for
// a dial error and so does not retry. Every other retry stays, but for a
// release's (once.go): a pooled connection that the server closed or reset
// mid-request (a restart, an idle timeout) is still retried on a fresh
// connection, and so are LOADING, READONLY, TRYAGAIN and CLUSTERDOWN
// answers. A release is sent once whatever the failure, and the Locker's
// background release asks again on its own schedule.

// dialRetries is go-redis's DialerRetries: attempts per connection.
const dialRetries = 1

// dialError is a failed dial on its way through go-redis. It has no Unwrap
// on purpose: go-redis retries a command whose error unwraps to a
// *net.OpError of a dial. revealDial makes the cause reachable again once
// the error is back in padlock's hands.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }

// revealed is an error from go-redis with the dial failure it carries
// reachable again, so that errors.As finds the *net.OpError (and errors.Is
// a deadline) as on every other backend. Its message is go-redis's.
type revealed struct{ err, dial error }

func (e *revealed) Error() string   { return e.err.Error() }
func (e *revealed) Unwrap() []error { return []error{e.err, e.dial} }

// revealDial returns err, with the dial failure under it (if any)
// reachable by errors.Is and errors.As.
func revealDial(err error) error {
	var de *dialError
	if err == nil || !errors.As(err, &de) {
		return err
	}
	return &revealed{err: err, dial: de.err}
}

// newDialer returns the dial function of a go-redis client: the
// application's (dial, from padlock.WithDialer) or a plain TCP dialer,
// then TLS with *tlsCfg when it is set (go-redis does TLS in its own
// dialer only, so padlock does it here, within the dial's deadline). The
// configuration is read at each dial, so that a caller may still change it
// (RedLock gives each master its own server name). Failures come back as
// dialError.
func newDialer(dial backends.DialFunc, tlsCfg **tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if dial == nil {
		// go-redis's own settings, where the deadline comes from ctx (the
		// pool gives each dial its DialTimeout).
		d := &net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second,
			Interval: 5 * time.Second, Count: 3}}
		dial = d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, &dialError{err}
		}
		if *tlsCfg == nil {
			return conn, nil
		}
		t := *tlsCfg
		if t.ServerName == "" {
			t = t.Clone()
			t.ServerName, _, _ = net.SplitHostPort(addr)
		}
		// Handshake now, within the dial's deadline, as go-redis's own TLS
		// dialer does: a failure is a dial error.
		tc := tls.Client(conn, t)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, &dialError{err}
		}
		return tc, nil
	}
}
