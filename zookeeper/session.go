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
	"github.com/padlock-go/padlock/driverkit"
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
	asked   time.Duration // the session timeout asked for
	ttl     time.Duration // the session timeout the server granted
	expired chan struct{} // closed when the session expires or closes
	exited  chan struct{} // closed when the event loop returns
	dead    atomic.Bool
	closer  atomic.Pointer[time.Timer] // closes the connection of a dead session

	ctx    context.Context // cancelled when the session ends: the parent of its holds' Lost
	cancel context.CancelCauseFunc
	held   sync.Map // queue node path → *hold, for the nodes' deletion events
	// parents are the holds granted on a look that set a children watch on
	// their name's node and read nothing of their own (waitTurn's first
	// look), by that node's path: the watch's event is what tells them of a
	// change, their own node's deletion among others (parentChanged).
	parentMu sync.Mutex
	parents  map[string][]*hold

	evMu sync.Mutex
	lost *time.Timer // ends the session after a disconnection of a whole timeout

	// proofs certifies how long the leader keeps the session (proof.go);
	// the prover, if started, keeps it current and closes proverDone.
	proofs     *proofs
	proverDone chan struct{}
}

// negotiated captures the session timeout the server granted, which
// go-zookeeper only reports in a log line, and routes the rest of its
// logging to slog at debug level.
type negotiated struct {
	log     *slog.Logger
	timeout atomic.Int64            // milliseconds
	session atomic.Pointer[session] // once granted
}

func (n *negotiated) Printf(format string, args ...any) {
	if strings.HasPrefix(format, "authenticated: id=%d, timeout=%d") && len(args) == 2 {
		if ms, ok := args[1].(int32); ok {
			n.timeout.Store(int64(ms))
			id, _ := args[0].(int64)
			if s := n.session.Load(); s != nil && s.voidedBy(id, time.Duration(ms)*time.Millisecond) {
				s.kill(fmt.Sprintf("a reconnect was granted session %#x with a %dms timeout", id, ms))
			}
		}
	}
	n.log.Debug("go-zookeeper: " + fmt.Sprintf(format, args...))
}

// voidedBy reports whether a reconnect granted session id with the given
// timeout voids the grants made on this session's terms. Another session
// does (this one expired), and so does a shorter timeout: the server may
// expire the session before its holds' Done closes. A longer one does not
// (a server that clamps timeouts differently granted more, and ZooKeeper
// then keeps the session at least as long as its holds count on): the
// holds keep the shorter lease, and the session is not ended for it.
func (s *session) voidedBy(id int64, granted time.Duration) bool {
	return id != s.id || granted < s.ttl
}

// connect opens a session with the given timeout and waits until the
// server has granted it, or for the dial timeout. A session that dies
// before it is used (it expired while its credentials were on their way:
// a short session on a loaded host) is replaced, within the same bound.
func (d *driver) connect(ctx context.Context, ttl time.Duration) (*session, error) {
	if err := driverkit.Probe(ctx, d.dialFn, d.servers); err != nil {
		return nil, driverkit.Unavailable("zookeeper "+strings.Join(d.servers, ","), err)
	}
	bound := time.NewTimer(d.dial)
	defer bound.Stop()
	for {
		s, err := d.connectOnce(ctx, ttl, bound.C)
		if !errors.Is(err, errDiedInOpen) {
			return s, err
		}
		d.log.Debug("padlock: zookeeper session died while it opened; opening another", "err", err)
	}
}

// errDiedInOpen marks a session that died before connect returned it.
var errDiedInOpen = errors.New("the session died while it opened")

// connectOnce is one attempt of connect, bounded by dialEnd.
func (d *driver) connectOnce(ctx context.Context, ttl time.Duration, dialEnd <-chan time.Time) (*session, error) {
	logger := &negotiated{log: d.log}
	created := time.Now() // before the session's creation, which the leader records itself
	dialer := func(network, address string, timeout time.Duration) (net.Conn, error) {
		// WithDialer's function or a net.Dialer, and TLS over it (dial.go).
		return d.dialServer(network, address, timeout, ttl)
	}
	// Events reach the session through go-zookeeper's callback, which
	// sees every one (its events channel drops what does not fit).
	onEvent := func(ev zk.Event) {
		if s := logger.session.Load(); s != nil {
			s.onEvent(ev)
		}
	}
	conn, events, err := zk.Connect(d.servers, ttl, zk.WithLogger(logger), zk.WithLogInfo(true), zk.WithDialer(dialer),
		zk.WithEventCallback(onEvent))
	if err != nil {
		return nil, driverkit.Unavailable("zookeeper connect", err)
	}
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
				closeWait(conn, events)
				return nil, err
			}
			s := &session{d: d, conn: conn, id: conn.SessionID(), asked: ttl, ttl: granted,
				expired: make(chan struct{}), exited: make(chan struct{}),
				proofs: newProofs(created, granted, d.lag(granted))}
			s.ctx, s.cancel = context.WithCancelCause(context.Background())
			logger.session.Store(s)
			if d.digest != "" {
				if err := addAuth(ctx, s, d.digest, dialEnd); err != nil {
					closeWait(conn, events)
					return nil, err
				}
			}
			go s.watch(events)
			return s, nil
		case <-dialEnd:
			closeWait(conn, events)
			return nil, driverkit.Unavailable("zookeeper connect", fmt.Errorf("no session within %v: %w", d.dial, d.cause(ctx)))
		case <-ctx.Done():
			// No session yet: the servers did not answer in the caller's
			// time, which is an outage, not contention.
			closeWait(conn, events)
			return nil, driverkit.Unavailable("zookeeper connect", fmt.Errorf("no session yet: %w", ctx.Err()))
		}
	}
}

// closeWait closes a connection that connect will not return, and waits
// (briefly) until go-zookeeper's goroutines are done with it, which is
// when it closes events: none of them logs or calls back after Open
// returned.
func closeWait(conn *zk.Conn, events <-chan zk.Event) {
	conn.Close()
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case _, ok := <-events:
			if !ok {
				return
			}
		case <-t.C:
			return
		}
	}
}

// addAuth sends the digest credentials, again if the connection closed
// under the request (go-zookeeper reconnects to the session, and only
// remembers credentials that were accepted), until the dial bound (dialEnd)
// or ctx ends. A session that died meanwhile is errDiedInOpen, for connect
// to open another. A refusal is the server's answer: it is not retried.
func addAuth(ctx context.Context, s *session, digest string, dialEnd <-chan time.Time) error {
	for {
		err := s.conn.AddAuth("digest", []byte(digest))
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, zk.ErrConnectionClosed):
			return driverkit.Unavailable("zookeeper auth", err)
		case s.dead.Load():
			return fmt.Errorf("%w: %w", errDiedInOpen, err)
		}
		select {
		case <-dialEnd:
			return driverkit.Unavailable("zookeeper auth", err)
		case <-ctx.Done():
			return driverkit.Unavailable("zookeeper auth", fmt.Errorf("%w: %w", err, ctx.Err()))
		case <-time.After(10 * time.Millisecond):
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
			return 0, driverkit.Unavailable("zookeeper connect", errors.New("the server granted a session but its timeout was not reported"))
		}
		time.Sleep(time.Millisecond)
	}
}

// watch drains the connection's events channel until go-zookeeper closes
// it with the connection, which ends the session.
func (s *session) watch(events <-chan zk.Event) {
	defer close(s.exited)
	for range events {
	}
	s.kill("its connection closed")
	s.evMu.Lock()
	if s.lost != nil {
		s.lost.Stop()
	}
	s.evMu.Unlock()
}

// onSessionEvent follows the session's state: an expiry (or a new session
// id, which go-zookeeper makes after an expiry) ends this session for good.
// So does a disconnection that lasts a whole session timeout: the server
// has expired the session by then (it last heard from the client before
// the disconnection), and without this a waiter on a server that never
// comes back would wait for ever. It runs on go-zookeeper's goroutines,
// so it never blocks.
func (s *session) onSessionEvent(ev zk.Event) {
	switch {
	case ev.State == zk.StateExpired || (ev.State == zk.StateHasSession && s.conn.SessionID() != s.id):
		s.kill("the server expired it")
	case ev.State == zk.StateHasSession:
		s.evMu.Lock()
		if s.lost != nil {
			s.lost.Stop() // reconnected within the session
			s.lost = nil
		}
		s.evMu.Unlock()
	case ev.State == zk.StateDisconnected:
		s.evMu.Lock()
		if s.lost == nil && s.alive() {
			s.lost = time.AfterFunc(s.ttl, func() { s.kill("no server for a whole session timeout") })
		}
		s.evMu.Unlock()
	}
}

// kill ends the session for good, saying why. Its connection is closed
// too: go-zookeeper would otherwise open a new session on it at once, and
// nodes a late or retried create put there would outlive their use.
func (s *session) kill(why string) { s.end(why, time.Time{}) }

// lapse ends the session when the proof of the leader's record of it ran
// out (proof.go). Its holds' Done closes at once, through their Lost; the
// server may still keep the session, and its nodes, until its certified
// expiry. Closing the connection would make the server delete the nodes,
// and hand the locks on, at once: so it closes at that expiry, when every
// hold's own deadline has passed too, never before a hold's Done.
func (s *session) lapse(why string) { s.end(why, s.proofs.expiry()) }

// end marks the session dead and closes its connection at closeAt (at
// once if it has passed).
func (s *session) end(why string, closeAt time.Time) {
	if s.dead.CompareAndSwap(false, true) {
		s.cancel(fmt.Errorf("zookeeper session ended: %s", why))
		close(s.expired)
		// On a timer's goroutine, never the event goroutine's: Close waits
		// for the event loop.
		s.closer.Store(time.AfterFunc(time.Until(closeAt), s.conn.Close))
		s.d.log.Warn("padlock: zookeeper session ended", "session", fmt.Sprintf("%#x", s.id), "why", why)
	}
}

// finished reports whether the session is dead and its connection and
// goroutines are done with: nothing is left to close.
func (s *session) finished() bool {
	select {
	case <-s.exited:
	default:
		return false
	}
	if s.proverDone != nil {
		select {
		case <-s.proverDone:
		default:
			return false
		}
	}
	return true
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
		if err := driverkit.Probe(ctx, s.d.dialFn, s.d.servers); err != nil {
			return zero, driverkit.Unavailable("zookeeper "+what, err)
		}
	}
	rctx, cancel := driverkit.WithRequestTimeout(ctx, s.d.reqTimeout)
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
			s.kill("the server expired it")
			return zero, fmt.Errorf("zookeeper %s: %w: %w", what, errSessionExpired, err)
		case errors.Is(err, zk.ErrNoAuth):
			// The nodes' ACL refuses this client's digest (or its lack of
			// one): a configuration error, to be named, never retried.
			return r.v, fmt.Errorf("%w: zookeeper %s: %w (the lock root's ACL admits another digest user)", backends.ErrAccessDenied, what, err)
		case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrNotEmpty),
			errors.Is(err, zk.ErrBadVersion):
			return r.v, err // answers, not failures: the caller decides
		default:
			return zero, driverkit.Unavailable("zookeeper "+what, err)
		}
	case <-s.expired:
		return zero, fmt.Errorf("zookeeper %s: %w", what, errSessionExpired)
	case <-rctx.Done():
		if errors.Is(context.Cause(rctx), driverkit.ErrNoAnswer) {
			return zero, driverkit.Unavailable("zookeeper "+what, fmt.Errorf("%w within %v", driverkit.ErrNoAnswer, s.d.reqTimeout))
		}
		return zero, driverkit.RequestError(ctx, "zookeeper "+what, ctx.Err())
	}
}

// do is call for requests that return only an error.
func do(ctx context.Context, s *session, what string, f func() error) error {
	_, err := call(ctx, s, what, func() (struct{}, error) { return struct{}{}, f() })
	return err
}

// shut ends the session: the server deletes its ephemeral nodes at once.
// wait then waits for its goroutines.
func (s *session) shut() {
	if t := s.closer.Load(); t != nil {
		t.Stop()
	}
	s.conn.Close()
}

// wait waits for go-zookeeper's goroutines and the prover of a shut
// session to end, until ctx ends: go-zookeeper v1.0.4 can wedge its
// connection loop for good (go-zookeeper/zk#163, fixed in padlock's own
// builds only), and closing a Locker must not hang on it. The goroutines
// left are reported.
func (s *session) wait(ctx context.Context) error {
	for _, done := range []<-chan struct{}{s.exited, s.proverDone} {
		if done == nil {
			continue
		}
		select {
		case <-done:
			continue // ended, whatever ctx says
		default:
		}
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("zookeeper: session %#x: go-zookeeper's connection goroutines still running at close (go-zookeeper/zk#163): %w", s.id, context.Cause(ctx))
		}
	}
	return nil
}

// closeSessions shuts every session, then waits for their goroutines for
// sessionCloseBound, whatever ctx says: a Close whose caller's deadline
// was spent on releases still lets them end, and one without a deadline
// does not hang on a wedged connection.
func closeSessions(ctx context.Context, all ...*session) error {
	for _, s := range all {
		s.shut()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sessionCloseBound)
	defer cancel()
	var errs []error
	for _, s := range all {
		if err := s.wait(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// closeOwn closes a session Open made for itself; what it leaves is
// logged.
func (d *driver) closeOwn(ctx context.Context, s *session) {
	if err := closeSessions(ctx, s); err != nil {
		d.log.Warn("padlock: zookeeper", "err", err)
	}
}

// sessionCloseBound bounds the wait for a closed session's goroutines:
// go-zookeeper's Close itself waits up to a second for the server to
// answer.
const sessionCloseBound = 10 * time.Second

// sessions hands out one live session per TTL: a session serves the
// acquisitions that ask for the timeout it asked for, and those that ask
// for the timeout the server granted it (a server's maximum turns many
// asks into one grant).
type sessions struct {
	mu      sync.Mutex
	all     []*session // every session not yet closed, live or dead
	closed  bool
	connect sync.Mutex // one connect at a time
}

// live returns a live session for an acquisition asking for ttl, or nil.
// ss.mu must be held.
func (ss *sessions) live(ttl time.Duration) *session {
	for _, s := range ss.all {
		if s.alive() && (s.asked == ttl || s.ttl == ttl) {
			return s
		}
	}
	return nil
}
