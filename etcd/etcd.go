// Package etcd is padlock's reference CP backend, registered as etcd://.
//
//	etcd://host1:2379,host2:2379/prefix?ttl=10s
//
// Each Locker keeps one session lease (per TTL) with the server, renewed by
// padlock's watchdog. Every acquisition puts a unique key under
// prefix/<escaped name>/, bound to that lease, so nothing outlives a crashed
// client. The key with the lowest create revision holds the lock; a waiter
// watches only its predecessor, so a release wakes exactly one waiter. The
// fencing token is the key's create revision, which Raft orders across the
// cluster. See docs/etcd.md.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/backends"
)

// Scheme is the URL scheme of this backend.
const Scheme = "etcd"

// DefaultPrefix is the key prefix used when the URL has no path.
const DefaultPrefix = "/padlock"

// DefaultDialTimeout bounds the initial connection; a server that does not
// answer within it makes Open fail with ErrUnavailable.
const DefaultDialTimeout = 5 * time.Second

func init() { padlock.Register(Scheme, open) }

func open(ctx context.Context, u *url.URL) (backends.Driver, error) {
	if err := backends.CheckParams(u, "dial_timeout"); err != nil {
		return nil, err
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%w: etcd url needs host:port[,host:port...], e.g. etcd://127.0.0.1:2379/padlock", padlock.ErrInvalidURL)
	}
	dial := DefaultDialTimeout
	if v := u.Query().Get("dial_timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%w: dial_timeout=%q is not a positive duration", padlock.ErrInvalidOption, v)
		}
		dial = d
	}
	prefix := strings.TrimRight(u.Path, "/")
	if prefix == "" {
		prefix = DefaultPrefix
	}
	cfg := clientv3.Config{
		Endpoints:   strings.Split(u.Host, ","),
		DialTimeout: dial,
		Logger:      zap.NewNop(),
		// Keep the connection honest: a dead server is noticed within seconds.
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
	}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: etcd %s: %v", padlock.ErrUnavailable, u.Host, err)
	}
	// clientv3.New does not wait for a connection; make sure there is a server.
	sctx, cancel := context.WithTimeout(ctx, dial)
	defer cancel()
	if _, err := cli.Get(sctx, prefix+"/", clientv3.WithCountOnly()); err != nil {
		cli.Close()
		return nil, fmt.Errorf("%w: etcd %s: %v", padlock.ErrUnavailable, u.Host, err)
	}
	dctx, dcancel := context.WithCancel(context.Background())
	return &driver{cli: cli, prefix: prefix, sessions: map[time.Duration]*session{},
		ctx: dctx, cancel: dcancel}, nil
}

type driver struct {
	cli    *clientv3.Client
	prefix string
	seq    atomic.Uint64

	ctx    context.Context // cancelled by Close; bounds background cleanup
	cancel context.CancelFunc
	bg     sync.WaitGroup

	mu       sync.Mutex
	sessions map[time.Duration]*session // one lease per requested TTL
	retired  []*session                 // replaced leases, revoked at Close
	granting sync.Mutex                 // one Grant at a time
}

func (d *driver) Capabilities() backends.Capabilities {
	return backends.Capabilities{
		Consistency:             backends.CP,
		FairFIFO:                true,
		MonotonicTokens:         true,
		FencingSurvivesFailover: true,
		PushWakeup:              true,
		MinTTL:                  2 * time.Second, // with etcd's default 1s election timeout
	}
}

// Close revokes every session lease, which deletes any key this client
// still has, and closes the client.
func (d *driver) Close(ctx context.Context) error {
	d.cancel()
	d.bg.Wait()
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
	if err := d.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// deleteKey deletes a key of ours that must not outlive its use (a cancelled
// waiter's, or one whose put had an unknown outcome). If the server cannot be
// reached it keeps trying in the background until the driver closes, because
// the shared session lease would otherwise keep the key alive.
func (d *driver) deleteKey(key string) {
	// A reachable server answers at once; an unreachable one is retried in
	// the background rather than holding up the caller's error.
	ctx, cancel := context.WithTimeout(d.ctx, time.Second)
	_, err := d.cli.Delete(ctx, key)
	cancel()
	if err == nil {
		return
	}
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		retry := backends.ExponentialBackoff(50*time.Millisecond, 5*time.Second)
		for attempt := 0; ; attempt++ {
			t := time.NewTimer(retry.NextBackoff(attempt))
			select {
			case <-d.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(d.ctx, 5*time.Second)
			_, err := d.cli.Delete(ctx, key)
			cancel()
			if err == nil {
				return
			}
		}
	}()
}

// unavailable classifies an etcd client error.
func unavailable(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("etcd %s: %w", op, err)
	}
	return fmt.Errorf("%w: etcd %s: %v", backends.ErrUnavailable, op, err)
}
