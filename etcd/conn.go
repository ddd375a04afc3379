package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// conn watches the client's gRPC connection so that requests fail fast on
// an outage. etcd's client waits for a connection before every request
// (gRPC's wait-for-ready), so a request to a server that is down would wait
// for its whole bound and then say only "context deadline exceeded". While
// the connection is in TRANSIENT_FAILURE (every endpoint refused or
// unreachable) requests fail at once with ErrUnavailable, carrying the dial
// error, and a request in flight when it enters that state is cut short.
type conn struct {
	cc        *grpc.ClientConn
	endpoints []string
	tls       *tls.Config       // nil without TLS
	dial      backends.DialFunc // nil: a net.Dialer
	log       *slog.Logger

	mu    sync.Mutex
	up    context.Context // cancelled, with the dial error as cause, while the connection fails
	down  context.CancelCauseFunc
	ready chan struct{} // closed when a failed connection is ready again
}

func newConn(cc *grpc.ClientConn, endpoints []string, tls *tls.Config, dial backends.DialFunc, log *slog.Logger) *conn {
	c := &conn{cc: cc, endpoints: endpoints, tls: tls, dial: dial, log: log}
	c.up, c.down = context.WithCancelCause(context.Background())
	return c
}

// watch follows the connection's state until ctx ends.
func (c *conn) watch(ctx context.Context) {
	for {
		s := c.cc.GetState()
		switch s {
		case connectivity.TransientFailure:
			c.markDown(ctx)
		case connectivity.Ready, connectivity.Idle:
			// Idle: gRPC put the channel to sleep (after 30 idle minutes,
			// even in the middle of an outage); the next request wakes it,
			// so requests must reach gRPC again.
			c.markUp()
		}
		if !c.cc.WaitForStateChange(ctx, s) {
			return
		}
	}
}

func (c *conn) markDown(ctx context.Context) {
	c.mu.Lock()
	already := c.up.Err() != nil
	c.mu.Unlock()
	if already {
		return
	}
	cause := c.probe(ctx)
	if cause == nil {
		cause = errors.New("the endpoints accept TCP connections, but the gRPC connection fails")
	}
	c.mu.Lock()
	// The probe takes time: mark the connection down only if it still is.
	if c.up.Err() == nil && c.cc.GetState() == connectivity.TransientFailure {
		c.ready = make(chan struct{})
		c.down(cause)
	}
	c.mu.Unlock()
	c.log.Warn("padlock: etcd unreachable", "endpoints", c.endpoints, "err", cause)
}

func (c *conn) markUp() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.up.Err() == nil {
		return
	}
	c.up, c.down = context.WithCancelCause(context.Background())
	close(c.ready)
	c.log.Info("padlock: etcd reachable again", "endpoints", c.endpoints)
}

// probe dials every endpoint to name why the connection fails (gRPC keeps
// the dial error, or the TLS handshake's, to itself). It returns nil if
// one accepts connections (and, over TLS, completes a handshake).
func (c *conn) probe(ctx context.Context) error {
	return probe(ctx, c.dial, c.endpoints, c.tls)
}

func probe(ctx context.Context, dial backends.DialFunc, endpoints []string, cfg *tls.Config) error {
	addrs := make([]string, len(endpoints))
	for i, ep := range endpoints {
		addrs[i] = hostPort(ep)
	}
	if cfg != nil && len(cfg.NextProtos) == 0 {
		// A gRPC server that does TLS itself closes a connection that did
		// not negotiate HTTP/2.
		cfg = cfg.Clone()
		cfg.NextProtos = []string{"h2"}
	}
	return driverkit.ProbeTLS(ctx, dial, addrs, cfg)
}

// hostPort turns an etcd endpoint (host:port, or a URL such as
// http://host:2379 in a client the application built) into host:port.
func hostPort(ep string) string {
	if u, err := url.Parse(ep); err == nil && u.Host != "" && strings.Contains(ep, "://") {
		return u.Host
	}
	return ep
}

// reconnectWait bounds the wait for gRPC to reconnect to a server that
// accepts TCP connections again: a live etcd answers within milliseconds.
const reconnectWait = time.Second

// usable returns the context that ends when the connection fails. While
// the connection is failing, it probes the endpoints: if none accepts a
// connection, it returns the dial error at once; if one does (the server
// is back), it asks gRPC to reconnect now rather than at the end of its
// backoff, and waits for that, bounded by ctx.
func (c *conn) usable(ctx context.Context) (context.Context, error) {
	c.mu.Lock()
	up, ready := c.up, c.ready
	c.mu.Unlock()
	if up.Err() == nil {
		return up, nil
	}
	if err := c.probe(ctx); err != nil {
		return nil, err
	}
	c.cc.Connect() // wakes a channel gRPC put to sleep
	c.cc.ResetConnectBackoff()
	t := time.NewTimer(reconnectWait)
	defer t.Stop()
	select {
	case <-ready:
	case <-t.C:
		return nil, errors.New("an endpoint accepts TCP connections, but no gRPC connection could be made")
	case <-ctx.Done():
		return nil, fmt.Errorf("an endpoint accepts TCP connections, but gRPC has not reconnected: %w", context.Cause(ctx))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.up, nil
}

// call runs one request bounded by timeout, whatever ctx says, and cut
// short by an outage. Its error is classified: ErrUnavailable with the
// cause for an outage or a request that got no answer in time, the
// context's error when the caller's ctx ended first.
func (c *conn) call(ctx context.Context, timeout time.Duration, what string, f func(context.Context) error) error {
	// One context per request: the bound, cut short when the connection
	// fails (the cause is read from up afterwards).
	rctx, cancel := driverkit.WithRequestTimeout(ctx, timeout)
	defer cancel()
	up, err := c.usable(rctx)
	if err != nil {
		return driverkit.Unavailable("etcd "+what, err)
	}
	stop := context.AfterFunc(up, cancel)
	defer stop()
	err = f(rctx)
	if err == nil {
		return nil
	}
	if denied(err) {
		return accessDenied(what, err)
	}
	switch cause := context.Cause(rctx); {
	case up.Err() != nil:
		return driverkit.Unavailable("etcd "+what, context.Cause(up))
	case errors.Is(cause, driverkit.ErrNoAnswer):
		return driverkit.Unavailable("etcd "+what, fmt.Errorf("%w within %v", cause, timeout))
	}
	return driverkit.RequestError(ctx, "etcd "+what, err)
}

// denied reports whether err is etcd refusing the credentials, or a
// permission the user's roles do not grant. An invalid or outdated token
// is not: the client logs in again (see login and queue.follow).
func denied(err error) bool {
	switch rpctypes.Error(err) {
	case rpctypes.ErrPermissionDenied, rpctypes.ErrAuthFailed, rpctypes.ErrUserEmpty, rpctypes.ErrUserNotFound:
		return true
	}
	return false
}

// accessDenied classifies a refusal as backends.ErrAccessDenied, with etcd's
// words and, when the user gave no credentials, what to do.
func accessDenied(what string, err error) error {
	hint := ""
	if rpctypes.Error(err) == rpctypes.ErrUserEmpty {
		hint = " (the server has authentication on: give etcd://user@host/…?password_file=…)"
	}
	return fmt.Errorf("%w: etcd %s: %v%s", backends.ErrAccessDenied, what, rpctypes.ErrorDesc(err), hint)
}

// staleToken reports whether err is etcd refusing a request's auth token
// (dropped, expired, or older than the last change to users and roles):
// the credentials are fine, and a fresh login mends it.
func staleToken(err error) bool {
	if err == nil {
		return false
	}
	switch rpctypes.Error(err) {
	case rpctypes.ErrInvalidAuthToken, rpctypes.ErrAuthOldRevision:
		return true
	}
	// A watch stream's own failure reaches the watcher as a gRPC status
	// that rpctypes does not map back.
	s := err.Error()
	return strings.Contains(s, rpctypes.ErrInvalidAuthToken.Error()) || strings.Contains(s, rpctypes.ErrAuthOldRevision.Error())
}

// contextDialer adapts dial to gRPC's dialer, which dials TCP.
func contextDialer(dial backends.DialFunc) func(context.Context, string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) { return dial(ctx, "tcp", addr) }
}
