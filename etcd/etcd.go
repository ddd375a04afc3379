// Package etcd is padlock's reference CP backend, registered as etcd://
// and, over TLS, etcds://.
//
//	etcd://[user:pass@]host1:2379,host2:2379/prefix?ttl=10s&dial_timeout=5s&request_timeout=5s
//	etcds://user@host1:2379/prefix?ca=ca.pem&cert=client.pem&key=client-key.pem&password_file=/run/secrets/etcd
//
// etcds:// verifies the servers against the system's roots, or ca=; cert=
// and key= are a client certificate for mutual TLS; etcd://…?ca=… is TLS
// too. A user and password log in to etcd's authentication (the client
// renews its token when the server expires it); password_file= or
// password_env= keep the password out of the URL. A refused password or
// a missing permission on the prefix is backends.ErrAccessDenied.
//
// Each Locker keeps one session lease (per TTL) with the server, renewed by
// padlock's renewal loop with one keep-alive per lease for all its holds.
// Every acquisition puts a key under prefix/<escaped name>/, bound to that
// lease, so nothing outlives a crashed client; a Locker reuses its keys'
// slots, so a hot name does not fill etcd's index with deleted keys. The
// key with the lowest create revision holds the lock; readers and permits
// of a semaphore are keys of the same queue, which say so in their values,
// and hold once the keys ahead of them admit them (claim.go). Waiters
// follow the queue from one watch per name and client, so a hand-off costs
// the release's write and a pushed event, and no read; the watch ends once
// the client has no waiter left and sees the name free. The fencing token is
// the key's create revision, which Raft orders across the cluster. See
// docs/etcd.md.
//
// Open dials the endpoints itself; New builds a Locker over a client the
// application already has, and leaves that client open.
package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// Scheme is the URL scheme of this backend.
const Scheme = "etcd"

// SchemeTLS is etcd:// over TLS.
const SchemeTLS = "etcds"

// DefaultPrefix is the key prefix used when the URL has no path.
const DefaultPrefix = "/padlock"

// DefaultDialTimeout bounds Open's wait for a server that does not answer;
// a server that refuses connections fails Open at once.
const DefaultDialTimeout = 5 * time.Second

// params are the URL parameters of etcd://, besides ttl and wait.
var params = append([]string{"dial_timeout", "request_timeout"}, driverkit.SecurityParams...)

func init() {
	padlock.Register(Scheme, open)
	padlock.Register(SchemeTLS, open)
}

func open(ctx context.Context, u *url.URL, cfg backends.Config) (backends.Driver, error) {
	if err := driverkit.CheckParams(u, params...); err != nil {
		return nil, err
	}
	endpoints, err := driverkit.Hosts(u, "2379")
	if err != nil {
		return nil, err
	}
	dial, reqTimeout, err := driverkit.Timeouts(u, DefaultDialTimeout)
	if err != nil {
		return nil, err
	}
	user, pass, tlsCfg, err := security(ctx, u, cfg.TLS, cfg.Dial, endpoints)
	if err != nil {
		return nil, err
	}
	lg := &login{endpoints: endpoints, tls: tlsCfg, dial: cfg.Dial}
	dialOpts := []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
		MinConnectTimeout: dial,
	}), grpc.WithChainUnaryInterceptor(lg.intercept)}
	if cfg.Dial != nil {
		dialOpts = append(dialOpts, grpc.WithContextDialer(contextDialer(cfg.Dial)))
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: dial,
		Username:    user,
		Password:    pass,
		TLS:         tlsCfg,
		Logger:      zap.NewNop(), // padlock reports through cfg.Logger
		// Keep the connection honest: a dead server is noticed within seconds.
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		// Reconnect within a second or two of a server's return, not after
		// gRPC's default backoff of up to two minutes.
		DialOptions: dialOpts,
	})
	if err != nil {
		lg.Close()
		// With a user, New logs in at once, bounded by dial.
		if denied(err) {
			return nil, accessDenied("log in to "+u.Host, err)
		}
		return nil, driverkit.Unavailable("etcd "+u.Host, err)
	}
	d, err := newDriver(ctx, cli, true, strings.TrimRight(u.Path, "/"), tlsCfg, cfg.Dial, dial, reqTimeout, cfg.Logger)
	if err != nil {
		cli.Close()
		lg.Close()
		return nil, err
	}
	d.login = lg
	return d, nil
}

// New returns a Locker over cli, an etcd client the application already
// has, with its keys under prefix (DefaultPrefix if empty). Closing the
// Locker revokes its session leases but leaves cli open. It checks that
// the cluster answers, within DefaultDialTimeout.
func New(ctx context.Context, cli *clientv3.Client, prefix string, opts ...padlock.OpenOption) (*padlock.Locker, error) {
	if ctx == nil {
		panic("padlock/etcd: New called with a nil Context")
	}
	if cli == nil {
		return nil, fmt.Errorf("%w: nil etcd client", backends.ErrInvalidOption)
	}
	d, err := newDriver(ctx, cli, false, strings.TrimRight(prefix, "/"), nil, nil, DefaultDialTimeout,
		driverkit.DefaultRequestTimeout, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	l, err := padlock.NewLocker(d, opts...)
	if err != nil {
		d.Close(ctx)
		return nil, err
	}
	return l, nil
}

func newDriver(ctx context.Context, cli *clientv3.Client, own bool, prefix string, tlsCfg *tls.Config, dialFn backends.DialFunc, dial, reqTimeout time.Duration, log *slog.Logger) (*driver, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	dctx, cancel := context.WithCancel(context.Background())
	d := &driver{cli: cli, own: own, prefix: prefix, reqTimeout: reqTimeout, log: log, granting: make(chan struct{}, 1),
		conn: newConn(cli.ActiveConnection(), cli.Endpoints(), tlsCfg, dialFn, log), janitor: driverkit.NewJanitor(),
		sessions: map[time.Duration]*session{}, slots: newSlots(), queues: map[string]*queue{},
		ctx: dctx, cancel: cancel}
	d.bg.Go(func() { d.conn.watch(dctx) })
	// clientv3.New does not wait for a connection; make sure there is a server.
	err := d.conn.call(ctx, dial, "connect to "+strings.Join(cli.Endpoints(), ","), func(ctx context.Context) error {
		_, err := cli.Get(ctx, prefix+"/", clientv3.WithCountOnly())
		return err
	})
	if err != nil {
		cancel()
		d.bg.Wait()
		return nil, err
	}
	return d, nil
}

type driver struct {
	cli        *clientv3.Client
	own        bool   // Close closes cli
	login      *login // closed by Close; nil when the application made cli
	prefix     string
	reqTimeout time.Duration
	log        *slog.Logger
	conn       *conn
	janitor    *driverkit.Janitor // deletes keys of failed or cancelled acquisitions
	slots      *slots

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	bg     sync.WaitGroup

	mu       sync.Mutex
	sessions map[time.Duration]*session // one lease per requested TTL
	retired  []*session                 // replaced leases, revoked at Close
	granting chan struct{}              // one Grant at a time: a slot, taken by sending (a wait that honours ctx)

	qmu         sync.Mutex
	queues      map[string]*queue // by name, while waited for; nil once closed
	watchStream atomic.Int64      // generation of the gRPC stream the watches share (see freshWatchStream)
}

func (d *driver) Capabilities() backends.Capabilities {
	return backends.Capabilities{
		Consistency:             backends.CP,
		FairFIFO:                true,
		MonotonicTokens:         true,
		FencingSurvivesFailover: true,
		PushWakeup:              true,
		DoneBeforeRegrant:       true,
		MinTTL:                  2 * time.Second, // with etcd's default 1s election timeout
		HoldsSurviveRestart:     backends.Yes,    // the raft log, on a quorum's disks before the answer
		SharedLocks:             true,            // readers' keys in the one queue (claim.go)
		Limits:                  true,
		Elections:               true, // candidacies' values in their keys (election.go)
	}
}

// call runs one request with the driver's request bound; see conn.call.
func (d *driver) call(ctx context.Context, what string, f func(context.Context) error) error {
	return d.conn.call(ctx, d.reqTimeout, what, f)
}

// Close revokes every session lease, which deletes any key this client
// still has, and closes the client if Open made it.
func (d *driver) Close(ctx context.Context) error {
	jerr := d.janitor.Close(ctx)
	d.mu.Lock()
	sessions, retired := d.sessions, d.retired
	d.sessions, d.retired = nil, nil
	d.mu.Unlock()
	var errs []error
	for _, s := range sessions {
		if !s.usable() {
			continue // expired already, or we could not reach the server to keep it
		}
		if err := s.revoke(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	// Every hold is gone by now, so the keys a retired lease may still keep
	// (a keep-alive sent just before retirement) can go at once. Best effort:
	// they expire anyway.
	for _, s := range retired {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_ = s.revoke(rctx)
		cancel()
	}
	if jerr != nil {
		errs = append(errs, fmt.Errorf("etcd: cleanup still running at close: %w", jerr))
	}
	d.closeQueues()
	d.cancel()
	d.bg.Wait()
	if d.own {
		if err := d.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
		d.login.Close()
	}
	return errors.Join(errs...)
}

// deleteKey deletes a key of ours that must not outlive its use (a cancelled
// waiter's, or one whose put had an unknown outcome). The caller waits for
// the first attempt at most driverkit.CleanupWait, so a healthy server has
// dropped the key when the failed call returns; the janitor retries until
// the driver closes, because the shared session lease would otherwise keep
// the key alive. rev is the key's create revision, or 0 if unknown.
func (d *driver) deleteKey(k slotKey, rev int64) {
	d.janitor.Settle(func(ctx context.Context) error { return d.delete(ctx, k, rev) })
}

// delete deletes k's key, and frees its slot once the server says so. The
// delete is guarded by the key's create revision (read first when rev is
// 0): the slot is reused once freed, and an attempt that timed out but
// lands late must never delete a later acquisition's key in the slot.
func (d *driver) delete(ctx context.Context, k slotKey, rev int64) error {
	err := d.call(ctx, "delete", func(ctx context.Context) error {
		if rev == 0 {
			resp, err := d.cli.Get(ctx, k.key, clientv3.WithKeysOnly())
			if err != nil || len(resp.Kvs) == 0 {
				return err
			}
			rev = resp.Kvs[0].CreateRevision
		}
		_, err := d.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k.key), "=", rev)).
			Then(clientv3.OpDelete(k.key)).Commit()
		return err
	})
	if err == nil || errors.Is(err, backends.ErrAccessDenied) {
		// Refused: the janitor gives up, and the key goes with the
		// session lease at Close; the slot must not stay taken.
		d.slots.free(k)
	}
	return err
}
