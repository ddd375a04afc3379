// Package redis is padlock's Redis backend: a single instance, a Redis
// Cluster, or RedLock over independent masters.
//
//	redis://[user:pass@]host:6379/0?ttl=10s&fair=true&wait_replicas=1&prefix=padlock&dial_timeout=2s
//	rediss://...                                  (TLS)
//	redis+cluster://[user:pass@]h1:p1,h2:p2,h3:p3?fair=true
//	redis+sentinel://[user:pass@]s1:26379,s2:26379/mymaster?wait_replicas=1
//	redlock://[user:pass@]h1:p1,h2:p2,h3:p3?drift=0.01
//
// A hold is a key holding a unique id with a PX lease, taken, renewed and
// released by Lua scripts that check the id first. The acquire script also
// increments a per-name fencing counter in the same atomic step. Waiters are
// woken by pub/sub, all of a Locker's waits sharing one connection. Fair mode
// queues waiters in FIFO order in the style of Redisson's fair lock.
// Readers (RLock) and permits (WithLimit) are members of a sorted set of
// the name by lease expiry, beside the writer's key (shared.go); RedLock
// grants a permit only on the stronger quorum quorumFor computes.
//
// Redis replicates asynchronously, so a failover can lose a hold and reset
// tokens: Capabilities report AP, and FencingSurvivesFailover is false.
// RedLock needs a majority of masters but gives no monotonic token. See
// docs/redis.md.
//
// New builds a Locker over a go-redis client the application already has.
package redis

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// URL schemes of this backend.
const (
	// Scheme is a single Redis instance (or a primary with replicas).
	Scheme = "redis"
	// SchemeTLS is Scheme over TLS.
	SchemeTLS = "rediss"
	// SchemeCluster is a Redis Cluster.
	SchemeCluster = "redis+cluster"
	// SchemeRedLock is RedLock over independent masters.
	SchemeRedLock = "redlock"
	// SchemeSentinel is a primary with replicas that Redis Sentinel fails
	// over: the URL names the sentinels and, as its path, the master.
	SchemeSentinel = "redis+sentinel"
)

// DefaultDrift is RedLock's default clock drift factor: the validity of a
// hold is TTL − elapsed − (drift × TTL + 2ms).
const DefaultDrift = 0.01

// pingTimeout bounds the connectivity check of Open.
const pingTimeout = 5 * time.Second

func init() {
	padlock.Register(Scheme, openSingle)
	padlock.Register(SchemeTLS, openSingle)
	padlock.Register(SchemeCluster, openCluster)
	padlock.Register(SchemeRedLock, openRedLock)
	padlock.Register(SchemeSentinel, openSentinel)
}

// Parameters of each scheme, besides ttl and wait. redis:// and rediss://
// also pass go-redis's own connection parameters through (listed in
// clientParams); an unknown parameter is an error on every scheme.
var (
	secParams      = driverkit.SecurityParams
	singleParams   = append(append([]string{"prefix", "fair", "wait_replicas"}, secParams...), clientParams...)
	clusterParams  = append([]string{"prefix", "fair"}, secParams...)
	redlockParams  = append([]string{"prefix", "drift"}, secParams...)
	sentinelParams = append([]string{"prefix", "fair", "wait_replicas", "sentinel_username", "sentinel_password_env",
		"dial_timeout", "read_timeout", "write_timeout"}, secParams...)
	clientParams = []string{"db", "protocol", "client_name", "max_retries", "min_retry_backoff", "max_retry_backoff",
		"dial_timeout", "read_timeout", "write_timeout", "pool_fifo", "pool_size", "pool_timeout",
		"min_idle_conns", "max_idle_conns", "max_active_conns", "conn_max_idle_time", "conn_max_lifetime", "skip_verify"}
)

// common holds the parameters every Redis scheme shares.
type common struct {
	prefix string
	fair   bool
}

// takeParams checks u's query against the scheme's parameters, then removes
// padlock's own from it, leaving the rest for go-redis.
func takeParams(u *url.URL, known []string) (common, url.Values, error) {
	c := common{prefix: DefaultPrefix}
	if err := driverkit.CheckParams(u, known...); err != nil {
		return c, nil, err
	}
	q := u.Query()
	own := url.Values{}
	for _, k := range append([]string{"prefix", "fair", "wait_replicas", "drift"}, secParams...) {
		if v, ok := q[k]; ok {
			own[k] = v
			q.Del(k)
		}
	}
	if v := own.Get("prefix"); v != "" {
		if strings.ContainsAny(v, "{}") {
			return c, nil, fmt.Errorf("%w: prefix %q must not contain '{' or '}' (they delimit hash tags)", backends.ErrInvalidOption, v)
		}
		c.prefix = v
	}
	var err error
	if c.fair, err = driverkit.BoolParam(u, "fair", false); err != nil {
		return c, nil, err
	}
	u.RawQuery = q.Encode()
	return c, own, nil
}

func openSingle(ctx context.Context, u *url.URL, cfg backends.Config) (backends.Driver, error) {
	routeLogs(cfg.Logger)
	waitReplicas, err := driverkit.IntParam(u, "wait_replicas", 0, 0)
	if err != nil {
		return nil, err
	}
	orig := *u
	c, _, err := takeParams(u, singleParams)
	if err != nil {
		return nil, err
	}
	opt, err := goredis.ParseURL(u.String())
	if err != nil {
		return nil, classifyParse(err)
	}
	if err := tlsAndPassword(&orig, cfg, &opt.TLSConfig, &opt.Password, &opt.Dialer); err != nil {
		return nil, err
	}
	opt.ContextTimeoutEnabled = true // renewals must give up at the lease deadline
	opt.DialerRetries = dialRetries
	cli := goredis.NewClient(opt)
	if err := ping(ctx, cli, u.Host); err != nil {
		cli.Close()
		return nil, err
	}
	return newDriver(cli, true, c, waitReplicas, holdsSurviveRestart(ctx, cli)), nil
}

func openCluster(ctx context.Context, u *url.URL, cfg backends.Config) (backends.Driver, error) {
	routeLogs(cfg.Logger)
	orig := *u
	c, _, err := takeParams(u, clusterParams)
	if err != nil {
		return nil, err
	}
	addrs, err := driverkit.Hosts(u, "6379")
	if err != nil {
		return nil, err
	}
	opt := &goredis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true, DialerRetries: dialRetries}
	opt.Username, opt.Password = driverkit.Credentials(u)
	if err := tlsAndPassword(&orig, cfg, &opt.TLSConfig, &opt.Password, &opt.Dialer); err != nil {
		return nil, err
	}
	cli := goredis.NewClusterClient(opt)
	if err := ping(ctx, cli, u.Host); err != nil {
		cli.Close()
		return nil, err
	}
	return newDriver(cli, true, c, 0, holdsSurviveRestart(ctx, cli)), nil
}

// openSentinel opens a Locker on the primary that Redis Sentinel names,
// following it across failovers (go-redis's failover client). Replication
// is asynchronous: a failover can lose a hold and reset tokens unless
// wait_replicas makes each acquisition wait for replicas.
func openSentinel(ctx context.Context, u *url.URL, cfg backends.Config) (backends.Driver, error) {
	routeLogs(cfg.Logger)
	waitReplicas, err := driverkit.IntParam(u, "wait_replicas", 0, 0)
	if err != nil {
		return nil, err
	}
	orig := *u
	c, _, err := takeParams(u, sentinelParams)
	if err != nil {
		return nil, err
	}
	master := strings.Trim(u.Path, "/")
	if master == "" || strings.Contains(master, "/") {
		return nil, fmt.Errorf("%w: redis+sentinel:// needs the master's name as its path (redis+sentinel://s1:26379,s2:26379/mymaster), got %q",
			backends.ErrInvalidURL, u.Path)
	}
	addrs, err := driverkit.Hosts(u, "26379")
	if err != nil {
		return nil, err
	}
	opt := &goredis.FailoverOptions{MasterName: master, SentinelAddrs: addrs, ContextTimeoutEnabled: true,
		DialerRetries: dialRetries}
	opt.Username, opt.Password = driverkit.Credentials(u)
	q := u.Query()
	opt.SentinelUsername = q.Get("sentinel_username")
	if env := q.Get("sentinel_password_env"); env != "" {
		pw, ok := os.LookupEnv(env)
		if !ok {
			return nil, fmt.Errorf("%w: sentinel_password_env: $%s is not set", backends.ErrInvalidOption, env)
		}
		opt.SentinelPassword = pw
	}
	for k, d := range map[string]*time.Duration{"dial_timeout": &opt.DialTimeout, "read_timeout": &opt.ReadTimeout,
		"write_timeout": &opt.WriteTimeout} {
		if *d, err = driverkit.DurationParam(u, k, 0); err != nil {
			return nil, err
		}
	}
	if err := tlsAndPassword(&orig, cfg, &opt.TLSConfig, &opt.Password, &opt.Dialer); err != nil {
		return nil, err
	}
	cli := goredis.NewFailoverClient(opt)
	if err := ping(ctx, cli, master+" via "+u.Host); err != nil {
		cli.Close()
		return nil, err
	}
	return newDriver(cli, true, c, waitReplicas, holdsSurviveRestart(ctx, cli)), nil
}

// Options configure New.
type Options struct {
	// Prefix starts every key padlock writes (DefaultPrefix if empty). It
	// must not contain '{' or '}'.
	Prefix string
	// Fair queues waiters in FIFO order.
	Fair bool
}

// New returns a Locker over cli, a go-redis client the application already
// has (a *goredis.Client for one instance, a *goredis.ClusterClient for a
// Redis Cluster). Closing the Locker leaves cli open. Give the client
// ContextTimeoutEnabled, so that renewals give up at the lease deadline.
func New(ctx context.Context, cli goredis.UniversalClient, o Options, opts ...padlock.OpenOption) (*padlock.Locker, error) {
	if ctx == nil {
		panic("padlock/redis: New called with a nil Context")
	}
	if cli == nil {
		return nil, fmt.Errorf("%w: nil redis client", backends.ErrInvalidOption)
	}
	c := common{prefix: o.Prefix, fair: o.Fair}
	if c.prefix == "" {
		c.prefix = DefaultPrefix
	}
	if strings.ContainsAny(c.prefix, "{}") {
		return nil, fmt.Errorf("%w: prefix %q must not contain '{' or '}' (they delimit hash tags)", backends.ErrInvalidOption, c.prefix)
	}
	if err := ping(ctx, cli, "redis"); err != nil {
		return nil, err
	}
	d := newDriver(cli, false, c, 0, holdsSurviveRestart(ctx, cli))
	l, err := padlock.NewLocker(d, opts...)
	if err != nil {
		d.Close(ctx)
		return nil, err
	}
	return l, nil
}

// capabilities of a single instance or cluster: asynchronous replication
// makes it AP, and a failover can reset the fencing counter. Whether holds
// survive a restart is the server's configuration (holdsSurviveRestart).
func capabilities(fair bool, restart backends.Tristate) backends.Capabilities {
	return backends.Capabilities{
		Consistency: backends.AP, FairFIFO: fair, MonotonicTokens: true,
		FencingSurvivesFailover: false, PushWakeup: true, DoneBeforeRegrant: true, MinTTL: time.Millisecond,
		HoldsSurviveRestart: restart, SharedLocks: true, Limits: true, Elections: true,
	}
}

func ping(ctx context.Context, c goredis.UniversalClient, host string) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := revealDial(c.Ping(ctx).Err()); err != nil {
		if denied(err) {
			return fmt.Errorf("%w: redis %s: %v", backends.ErrAccessDenied, host, err)
		}
		if goredis.HasErrorPrefix(err, "DB index") {
			// SELECT of a database the server does not have (its
			// "databases" setting): the URL is wrong, no retry mends it.
			return fmt.Errorf("%w: redis %s: the URL's database: %v", backends.ErrInvalidURL, host, err)
		}
		return driverkit.Unavailable("redis "+host, err)
	}
	return nil
}

// classifyParse maps go-redis URL errors onto padlock's sentinels: an
// unknown option is ErrInvalidOption, anything else ErrInvalidURL.
func classifyParse(err error) error {
	if strings.Contains(err.Error(), "unexpected option") || strings.Contains(err.Error(), "invalid ") {
		return fmt.Errorf("%w: %v", backends.ErrInvalidOption, err)
	}
	return fmt.Errorf("%w: %v", backends.ErrInvalidURL, err)
}

// requestError classifies an error of a request: the server refusing the
// credentials or a permission (WRONGPASS, NOAUTH, NOPERM) is
// ErrAccessDenied, with the server's words; anything else as
// driverkit.RequestError does.
func requestError(ctx context.Context, what string, err error) error {
	err = revealDial(err)
	if denied(err) {
		return fmt.Errorf("%w: %s: %v", backends.ErrAccessDenied, what, err)
	}
	return driverkit.RequestError(ctx, what, err)
}

func denied(err error) bool {
	for _, p := range []string{"WRONGPASS", "NOAUTH", "NOPERM"} {
		if goredis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// tlsAndPassword applies the URL's TLS parameters (and the application's
// tls.Config), its password_file= or password_env= and padlock's dial
// function (over the application's, from WithDialer: see newDialer) to
// opt's fields.
func tlsAndPassword(u *url.URL, cfg backends.Config, tlsCfg **tls.Config, password *string,
	dialer *func(ctx context.Context, network, addr string) (net.Conn, error)) error {
	*dialer = newDialer(cfg.Dial, tlsCfg)
	t, on, err := driverkit.TLSConfig(u, cfg.TLS)
	if err != nil {
		return err
	}
	if on {
		if *tlsCfg != nil && t.ServerName == "" {
			t.ServerName = (*tlsCfg).ServerName // rediss:// verifies the host it dials
		}
		if t.ServerName == "" {
			t.ServerName = u.Hostname()
		}
		*tlsCfg = t
	}
	pw, err := driverkit.Password(u)
	if err != nil {
		return err
	}
	if pw != "" {
		*password = pw
	}
	return nil
}
