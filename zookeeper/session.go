package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/padlock-go/padlock/backends"
)

// session is one ZooKeeper session, shared by every hold and waiter of a
// Locker that asked for one TTL: ZooKeeper's own heartbeat keeps it, and
// its ephemeral nodes, alive. go-zookeeper replaces an expired session with
// a new one on the same connection; a session here is the first one only:
// once it expires it is dead for good, and the driver opens another.
type session struct {
	d       *driver
	conn    *zk.Conn
	id      int64         // the session's id; a different id means it expired
	ttl     time.Duration // the session timeout the server granted
	expired chan struct{} // closed when the session expires or closes
	exited  chan struct{} // closed when the event loop returns
	dead    atomic.Bool
}

// negotiated captures the session timeout the server granted, which
// go-zookeeper only reports in a log line, and routes the rest of its
// logging to slog at debug level.
type negotiated struct {
	log     *slog.Logger
	timeout atomic.Int64 // milliseconds
}

func (n *negotiated) Printf(format string, args ...any) {
	if strings.HasPrefix(format, "authenticated: id=%d, timeout=%d") && len(args) == 2 {
		if ms, ok := args[1].(int32); ok {
			n.timeout.Store(int64(ms))
		}
	}
	n.log.Debug("go-zookeeper: " + fmt.Sprintf(format, args...))
}

// connect opens a session with the given timeout and waits until the
// server has granted it, or for the dial timeout.
func (d *driver) connect(ctx context.Context, ttl time.Duration) (*session, error) {
	if err := backends.Probe(ctx, d.dialFn, d.servers); err != nil {
		return nil, backends.Unavailable("zookeeper "+strings.Join(d.servers, ","), err)
	}
	logger := &negotiated{log: d.log}
	dialer := func(network, address string, timeout time.Duration) (net.Conn, error) {
		if d.dialFn != nil {
			ctx, cancel := context.WithTimeout(context.Background(), min(timeout, d.dial))
			defer cancel()
			return d.dialFn(ctx, network, address)
		}
		return (&net.Dialer{Timeout: min(timeout, d.dial)}).Dial(network, address)
	}
	conn, events, err := zk.Connect(d.servers, ttl, zk.WithLogger(logger), zk.WithLogInfo(true), zk.WithDialer(dialer))
	if err != nil {
		return nil, backends.Unavailable("zookeeper connect", err)
	}
	t := time.NewTimer(d.dial)
	defer t.Stop()
	for {
		select {
		case ev := <-events:
			if ev.Type != zk.EventSession || ev.State != zk.StateHasSession {
				continue
			}
			// go-zookeeper logs the granted timeout just after it sends this
			// event. The lease must be the granted one, never the one asked
			// for (a server that lowers it would expire the session before
			// Done closed), so wait for it.
			granted, err := waitGranted(ctx, logger)
			if err != nil {
				conn.Close()
				return nil, err
			}
			s := &session{d: d, conn: conn, id: conn.SessionID(), ttl: granted,
				expired: make(chan struct{}), exited: make(chan struct{})}
			if d.digest != "" {
				if err := conn.AddAuth("digest", []byte(d.digest)); err != nil {
					conn.Close()
					return nil, backends.Unavailable("zookeeper auth", err)
				}
			}
			go s.watch(events)
			return s, nil
		case <-t.C:
			conn.Close()
			// Name why: a server that refuses connections, or one that
			// takes them but grants no session (a paused process, an
			// ensemble without a quorum), where the probe finds nothing.
			why := backends.Probe(ctx, d.dialFn, d.servers)
			if why == nil {
				why = errors.New("the servers take connections but granted no session")
			}
			return nil, backends.Unavailable("zookeeper connect", fmt.Errorf("no session within %v: %w", d.dial, why))
		case <-ctx.Done():
			// No session yet: the servers did not answer in the caller's
			// time, which is an outage, not contention.
			conn.Close()
			return nil, backends.Unavailable("zookeeper connect", fmt.Errorf("no session yet: %w", ctx.Err()))
		}
	}
}

// waitGranted waits (briefly) for the granted session timeout that
// go-zookeeper logs right after the session is made.
func waitGranted(ctx context.Context, n *negotiated) (time.Duration, error) {
	deadline := time.Now().Add(time.Second)
	for {
		if ms := n.timeout.Load(); ms > 0 {
			return time.Duration(ms) * time.Millisecond, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, backends.Unavailable("zookeeper connect", errors.New("the server granted a session but its timeout was not reported"))
		}
		time.Sleep(time.Millisecond)
	}
}

// watch follows the session's events: an expiry (or a new session id,
// which go-zookeeper makes after an expiry) ends this session for good.
// So does a disconnection that lasts a whole session timeout: the server
// has expired the session by then (it last heard from the client before
// the disconnection), and without this a waiter on a server that never
// comes back would wait for ever.
func (s *session) watch(events <-chan zk.Event) {
	defer close(s.exited)
	var lost *time.Timer
	defer func() {
		if lost != nil {
			lost.Stop()
		}
	}()
	for ev := range events {
		if ev.Type != zk.EventSession {
			continue
		}
		switch {
		case ev.State == zk.StateExpired || (ev.State == zk.StateHasSession && s.conn.SessionID() != s.id):
			s.kill()
		case ev.State == zk.StateHasSession:
			if lost != nil {
				lost.Stop() // reconnected within the session
				lost = nil
			}
		case ev.State == zk.StateDisconnected && lost == nil:
			lost = time.AfterFunc(s.ttl, s.kill)
		}
	}
	s.kill() // the connection closed
}

// kill ends the session for good. Its connection is closed too:
// go-zookeeper would otherwise open a new session on it at once, and
// nodes a late or retried create put there would outlive their use.
func (s *session) kill() {
	if s.dead.CompareAndSwap(false, true) {
		close(s.expired)
		go s.conn.Close() // not on the event goroutine: Close waits for the loop
		s.d.log.Warn("padlock: zookeeper session expired", "session", fmt.Sprintf("%#x", s.id))
	}
}

// alive reports whether the session can still be relied on.
func (s *session) alive() bool { return !s.dead.Load() }

var errSessionExpired = errors.New("zookeeper session expired")

// call runs one request bounded by the driver's request timeout, whatever
// ctx says. go-zookeeper's calls take no context, so the call runs on its
// own goroutine, which ends when the server answers or the connection
// fails; its result comes back only through the channel, so an abandoned
// call touches nothing of the caller's. While the client has no connection
// and no server accepts one, the call fails at once with the dial error.
func call[T any](ctx context.Context, s *session, what string, f func() (T, error)) (T, error) {
	var zero T
	if !s.alive() {
		return zero, fmt.Errorf("zookeeper %s: %w", what, errSessionExpired)
	}
	if st := s.conn.State(); st != zk.StateHasSession && st != zk.StateConnected {
		if err := backends.Probe(ctx, s.d.dialFn, s.d.servers); err != nil {
			return zero, backends.Unavailable("zookeeper "+what, err)
		}
	}
	rctx, cancel := backends.WithRequestTimeout(ctx, s.d.reqTimeout)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	res := make(chan result, 1)
	go func() {
		v, err := f()
		res <- result{v, err}
	}()
	select {
	case r := <-res:
		switch err := r.err; {
		case err == nil:
			return r.v, nil
		case errors.Is(err, zk.ErrSessionExpired):
			s.kill()
			return zero, fmt.Errorf("zookeeper %s: %w", what, errSessionExpired)
		case errors.Is(err, zk.ErrNoAuth):
			// The nodes' ACL refuses this client's digest (or its lack of
			// one): a configuration error, to be named, never retried.
			return r.v, fmt.Errorf("%w: zookeeper %s: %w (the lock root's ACL admits another digest user)", backends.ErrAccessDenied, what, err)
		case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrNotEmpty),
			errors.Is(err, zk.ErrBadVersion):
			return r.v, err // answers, not failures: the caller decides
		default:
			return zero, backends.Unavailable("zookeeper "+what, err)
		}
	case <-s.expired:
		return zero, fmt.Errorf("zookeeper %s: %w", what, errSessionExpired)
	case <-rctx.Done():
		if errors.Is(context.Cause(rctx), backends.ErrNoAnswer) {
			return zero, backends.Unavailable("zookeeper "+what, fmt.Errorf("%w within %v", backends.ErrNoAnswer, s.d.reqTimeout))
		}
		return zero, backends.RequestError(ctx, "zookeeper "+what, ctx.Err())
	}
}

// do is call for requests that return only an error.
func do(ctx context.Context, s *session, what string, f func() error) error {
	_, err := call(ctx, s, what, func() (struct{}, error) { return struct{}{}, f() })
	return err
}

// close ends the session: the server deletes its ephemeral nodes at once.
func (s *session) close() {
	s.conn.Close()
	<-s.exited
}

// sessions hands out one live session per requested TTL.
type sessions struct {
	mu      sync.Mutex
	byTTL   map[time.Duration]*session
	retired []*session // expired ones, closed at Close
	closed  bool
	connect sync.Mutex // one connect at a time
}
