// Package zookeeper is padlock's ZooKeeper backend, registered as zk://,
// and as zks:// over TLS: the Curator lock recipe, with fencing tokens,
// counted reentrancy (in the portable layer), a cleanup after every
// cancelled wait and a lost-lock notice.
//
//	zk://[h1:2181,h2:2181,h3:2181]/lock/root?ttl=6s&digest=user:password&dial_timeout=5s&request_timeout=5s
//	zk://zk1:2181/lock/root?digest=user&password_file=/run/secrets/zk
//	zks://zk1:2281,zk2:2281/lock/root?ca=/etc/zk/ca.pem&cert=/etc/zk/client.pem&key=/etc/zk/client-key.pem
//
// digest=user with password_file= or password_env= keeps the digest's
// password out of the URL. zks:// speaks TLS to ZooKeeper's secure client
// port (secureClientPort), verifying each server's own host name unless
// server_name= says otherwise; ca=, cert=, key=, server_name= or
// padlock.WithTLSConfig on zk:// do too.
//
// Each acquisition creates an ephemeral sequential node under
// root/<encoded name>/, protected in Curator's way (its name carries a
// per-acquisition id, so a create whose answer was lost is found again
// rather than orphaned). The lowest sequence holds the lock; a waiter
// watches only its predecessor. Readers and permits of a semaphore queue
// in the same line, in nodes whose names say their kind and limit
// (kinds.go), granted by backends.Mode's rule (wait.go); a writer turns
// into a reader in place by marking its node shared (share.go). The
// fencing token is the node's czxid, the
// transaction id that created it: ordered across the ensemble, and it keeps
// rising when the name's parent is deleted and made again, which sequence
// numbers do not.
//
// The portable ttl is the session timeout asked for; the server clamps it
// (by default to between 2 and 20 ticks), and the granted value is the
// lease every hold reports. One session per distinct TTL is shared by all
// holds with that TTL; its heartbeat is the renewal, and Renew proves the
// session alive with one cheap read. See docs/zookeeper.md.
package zookeeper

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// Scheme is the URL scheme of this backend.
const Scheme = "zk"

// SchemeTLS is zk:// over TLS, to ZooKeeper's secure client port.
const SchemeTLS = "zks"

// DefaultRoot is the lock root when the URL has no path.
const DefaultRoot = "/padlock"

// DefaultDialTimeout bounds Open's wait for a session.
const DefaultDialTimeout = 5 * time.Second

// ownSessionTimeout is the timeout of a session the driver opens for its
// own requests (making the root, reading holders) when it has no live
// session to borrow: padlock's default TTL, so that holds at the default
// TTL share it. It is the driver's own constant, not the root package's
// policy: a session that only reads needs no particular timeout.
const ownSessionTimeout = 10 * time.Second

// digestAuth splits digest= into its user and password: user:password, or
// user with the password from password_file= or password_env=.
func digestAuth(u *url.URL, digest string) (user, pass string, err error) {
	user, pass, inline := strings.Cut(digest, ":")
	q := u.Query()
	external := q.Has("password_file") || q.Has("password_env")
	switch {
	case user == "":
		return "", "", fmt.Errorf("%w: digest= needs a user (user:password, or user with password_file=)", backends.ErrInvalidOption)
	case inline && external:
		return "", "", fmt.Errorf("%w: a digest password and password_file= or password_env= at once", backends.ErrInvalidOption)
	case external:
		pass, err = driverkit.Password(u)
		return user, pass, err
	case !inline:
		return "", "", fmt.Errorf("%w: digest must be user:password, or user with password_file= or password_env=", backends.ErrInvalidOption)
	}
	return user, pass, nil
}

// params are the URL parameters of zk:// and zks://, besides ttl and wait.
var params = append([]string{"digest", "dial_timeout", "request_timeout"}, driverkit.SecurityParams...)

func init() {
	padlock.Register(Scheme, open)
	padlock.Register(SchemeTLS, open)
}

func open(ctx context.Context, u *url.URL, cfg backends.Config) (backends.Driver, error) {
	if err := driverkit.CheckParams(u, params...); err != nil {
		return nil, err
	}
	servers, err := driverkit.Hosts(u, "2181")
	if err != nil {
		return nil, err
	}
	dial, reqTimeout, err := driverkit.Timeouts(u, DefaultDialTimeout)
	if err != nil {
		return nil, err
	}
	root := strings.TrimRight(u.Path, "/")
	if root == "" {
		root = DefaultRoot
	}
	if root != path.Clean(root) || strings.Contains(root, "//") {
		return nil, fmt.Errorf("%w: %s:// lock root %q is not a clean absolute path", backends.ErrInvalidURL, u.Scheme, root)
	}
	d := &driver{servers: servers, root: root, dial: dial, dialFn: cfg.Dial, reqTimeout: reqTimeout, log: cfg.Logger,
		janitor: driverkit.NewJanitor(), acl: zk.WorldACL(zk.PermAll)}
	d.ctx, d.stop = context.WithCancel(context.Background())
	if digest := u.Query().Get("digest"); digest != "" {
		user, pass, err := digestAuth(u, digest)
		if err != nil {
			return nil, err
		}
		d.digest = user + ":" + pass
		// Only this user may touch the nodes padlock creates; anyone may
		// read them (to see who holds what).
		d.acl = append(zk.DigestACL(zk.PermAll, user, pass), zk.WorldACL(zk.PermRead)...)
	}
	tlsCfg, on, err := driverkit.TLSConfig(u, cfg.TLS)
	if err != nil {
		return nil, err
	}
	if on || u.Scheme == SchemeTLS {
		d.tls = tlsCfg
	}
	if d.tls != nil {
		// Before any session: a failed handshake names its cause at once.
		if err := d.probeTLS(ctx); err != nil {
			return nil, err
		}
	}
	if d.digest == "" && (u.Query().Has("password_file") || u.Query().Has("password_env")) {
		return nil, fmt.Errorf("%w: password_file= and password_env= are the password of digest=user, which is missing", backends.ErrInvalidOption)
	}
	// A first session, asking for padlock's shortest TTL, learns the
	// server's minimum (ZooKeeper's default minimum is two ticks). It is
	// closed at once: go-zookeeper gives up on a connection that is silent
	// for two thirds of the timeout, which so short a session is on a
	// loaded machine. (It derives its handshake deadlines from the timeout
	// asked for, so asking for less would fail against a server that
	// fsyncs slowly.)
	probe, err := d.connect(ctx, backends.MinTTL)
	if err != nil {
		d.Close(ctx)
		return nil, err
	}
	d.closeOwn(ctx, probe)
	d.minTTL = probe.ttl
	// The root is made on a session of the driver's own.
	s, err := d.connect(ctx, ownSessionTimeout)
	if err == nil {
		err = d.makeRoot(ctx, s)
		d.closeOwn(ctx, s)
	}
	if err != nil {
		d.Close(ctx)
		return nil, err
	}
	return d, nil
}

type driver struct {
	servers    []string
	root       string
	digest     string
	acl        []zk.ACL
	dial       time.Duration
	dialFn     backends.DialFunc // nil: a net.Dialer
	tls        *tls.Config       // nil: plain text
	failed     connFailure       // why the last connection made no session
	reqTimeout time.Duration
	log        *slog.Logger
	janitor    *driverkit.Janitor // deletes nodes of failed or cancelled acquisitions
	sessions   sessions
	// doomed holds the paths of queue nodes deleteNode is deleting: nodes
	// of acquisitions that failed or were cancelled, never granted. A
	// TryLock does not take them for holders (on a loaded server their
	// delete can outlast the TryLock that made them).
	doomed sync.Map
	// createOnly is set once a name's parent refused the setData that
	// enqueue's multi makes (createWithZxid): from then on nodes are
	// created alone, and their czxid read.
	createOnly atomic.Bool
	// released are the last writer nodes this driver's holds deleted,
	// for a waiter whose predecessor went before its watch was set (see
	// waitTurn).
	released releasedNodes

	mu     sync.Mutex
	minTTL time.Duration // the server's minimum, once a session showed it
	closed bool          // Close has begun: no new background work

	// ctx ends when Close begins; bg counts the goroutines of
	// WatchHolders, which Close waits for.
	ctx  context.Context
	stop context.CancelFunc
	bg   sync.WaitGroup
}

func (d *driver) Capabilities() backends.Capabilities {
	d.mu.Lock()
	defer d.mu.Unlock()
	return backends.Capabilities{
		Consistency:             backends.CP,
		FairFIFO:                true,
		MonotonicTokens:         true,
		FencingSurvivesFailover: true,
		PushWakeup:              true,
		DoneBeforeRegrant:       true,
		MinTTL:                  2 * d.minTTL,
		HoldsSurviveRestart:     backends.Yes, // the transaction log, written before the answer
		SharedLocks:             true,         // readers' nodes (kinds.go, wait.go)
		Limits:                  true,         // permits' nodes, their limit in their names
		Elections:               true,         // candidacies' values in their nodes' data (election.go)
	}
}

// minSession is the shortest session timeout padlock asks for: twice the
// server's minimum (four ticks by default), so that the session's prover,
// which needs at least a tick between two proofs, certifies the session
// often enough (proof.go).
func (d *driver) minSession() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return 2 * d.minTTL
}

// lag is at least one tick of the server's: half its minimum session
// timeout (ZooKeeper's default minimum is two ticks), or, before the
// minimum is known, half the session's own timeout.
func (d *driver) lag(ttl time.Duration) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.minTTL > 0 {
		return d.minTTL / 2
	}
	return ttl / 2
}

// session returns a live session for ttl, opening one when there is none
// or the last one expired.
func (d *driver) session(ctx context.Context, ttl time.Duration) (*session, error) {
	ttl = max(ttl, d.minSession())
	ss := &d.sessions
	get := func() (*session, error) {
		ss.mu.Lock()
		defer ss.mu.Unlock()
		if ss.closed {
			return nil, backends.ErrClosed
		}
		if s := ss.live(ttl); s != nil {
			return s, nil
		}
		return nil, nil
	}
	if s, err := get(); s != nil || err != nil {
		return s, err
	}
	ss.connect.Lock()
	defer ss.connect.Unlock()
	if s, err := get(); s != nil || err != nil {
		return s, err
	}
	s, err := d.connect(ctx, ttl)
	if err != nil {
		return nil, err
	}
	s.startProver()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		d.closeOwn(ctx, s)
		return nil, backends.ErrClosed
	}
	// Dead sessions stay until their connection has closed (a lapsed one
	// closes it only at its certified expiry); Close closes every one.
	ss.all = append(slices.DeleteFunc(ss.all, (*session).finished), s)
	return s, nil
}

// makeRoot creates the lock root and its parents if they are missing. The
// root gets padlock's ACL; parents it has to make are left open (as
// ZooKeeper's own default), so that one user's lock root never keeps
// another user from making theirs beside it.
func (d *driver) makeRoot(ctx context.Context, s *session) error {
	p := ""
	for _, part := range strings.Split(strings.TrimPrefix(d.root, "/"), "/") {
		p += "/" + part
		acl := zk.WorldACL(zk.PermAll)
		if p == d.root {
			acl = d.acl
		}
		create := func() error {
			_, err := s.conn.Create(p, nil, 0, acl)
			return err
		}
		// A connection lost under the create (a leader election closes
		// every connection) leaves the session, and the create is safe to
		// send again: ride it out for the dial timeout.
		deadline := time.Now().Add(d.dial)
		err := do(ctx, s, "create "+p, create)
		for attempt := 0; errors.Is(err, backends.ErrUnavailable) && time.Now().Before(deadline); attempt++ {
			if !rideOut(ctx, s, err, attempt) {
				break
			}
			err = do(ctx, s, "create "+p, create)
		}
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// Close closes every session, which makes the server delete every node
// this client still has.
func (d *driver) Close(ctx context.Context) error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.stop()
	d.bg.Wait() // the watches end with d.ctx
	jerr := d.janitor.Close(ctx)
	ss := &d.sessions
	ss.mu.Lock()
	ss.closed = true
	all := ss.all
	ss.all = nil
	ss.mu.Unlock()
	var errs []error
	if jerr != nil {
		errs = append(errs, fmt.Errorf("zookeeper: cleanup still running at close: %w", jerr))
	}
	if err := closeSessions(ctx, all...); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
