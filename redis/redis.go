// Package redis is padlock's Redis backend: a single instance, a Redis
// Cluster, or RedLock over independent masters.
//
//	redis://[user:pass@]host:6379/0?ttl=10s&fair=true&wait_replicas=1&prefix=padlock
//	rediss://...                                  (TLS)
//	redis+cluster://[user:pass@]h1:p1,h2:p2,h3:p3?fair=true
//	redlock://[user:pass@]h1:p1,h2:p2,h3:p3?drift=0.01
//
// A hold is a key holding a unique id with a PX lease, taken, renewed and
// released by Lua scripts that check the id first. The acquire script also
// increments a per-name fencing counter in the same atomic step. Waiters are
// woken by pub/sub, all of a Locker's waits sharing one connection. Fair mode
// queues waiters in FIFO order in the style of Redisson's fair lock.
//
// Redis replicates asynchronously, so a failover can lose a hold and reset
// tokens: Capabilities report AP, and FencingSurvivesFailover is false.
// RedLock needs a majority of masters but gives no monotonic token. See
// docs/redis.md.
package redis

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/backends"
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
}

// common holds the parameters every Redis scheme shares.
type common struct {
	prefix string
	fair   bool
}

// takeParams removes padlock's own parameters from u's query, leaving the
// rest for go-redis, and validates them.
func takeParams(u *url.URL, allowed ...string) (common, url.Values, error) {
	q := u.Query()
	own := url.Values{}
	for _, k := range allowed {
		if v, ok := q[k]; ok {
			own[k] = v
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	c := common{prefix: DefaultPrefix}
	if v := own.Get("prefix"); v != "" {
		if strings.ContainsAny(v, "{}") {
			return c, nil, fmt.Errorf("%w: prefix %q must not contain '{' or '}' (they delimit hash tags)", padlock.ErrInvalidOption, v)
		}
		c.prefix = v
	}
	if v := own.Get("fair"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return c, nil, fmt.Errorf("%w: fair=%q is not a boolean", padlock.ErrInvalidOption, v)
		}
		c.fair = b
	}
	return c, own, nil
}

func openSingle(ctx context.Context, u *url.URL) (backends.Driver, error) {
	c, own, err := takeParams(u, "prefix", "fair", "wait_replicas")
	if err != nil {
		return nil, err
	}
	waitReplicas := 0
	if v := own.Get("wait_replicas"); v != "" {
		if waitReplicas, err = strconv.Atoi(v); err != nil || waitReplicas < 0 {
			return nil, fmt.Errorf("%w: wait_replicas=%q is not a count", padlock.ErrInvalidOption, v)
		}
	}
	opt, err := goredis.ParseURL(u.String())
	if err != nil {
		return nil, classifyParse(err)
	}
	opt.ContextTimeoutEnabled = true // renewals must give up at the lease deadline
	cli := goredis.NewClient(opt)
	if err := ping(ctx, cli); err != nil {
		cli.Close()
		return nil, err
	}
	caps := capabilities(c.fair)
	return &driver{c: cli, prefix: c.prefix, fair: c.fair, waitReplicas: waitReplicas,
		wake: newWaker(cli), caps: caps}, nil
}

func openCluster(ctx context.Context, u *url.URL) (backends.Driver, error) {
	c, _, err := takeParams(u, "prefix", "fair")
	if err != nil {
		return nil, err
	}
	if err := backends.CheckParams(u); err != nil {
		return nil, err
	}
	addrs, err := hosts(u)
	if err != nil {
		return nil, err
	}
	opt := &goredis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true}
	if u.User != nil {
		opt.Username = u.User.Username()
		opt.Password, _ = u.User.Password()
	}
	cli := goredis.NewClusterClient(opt)
	if err := ping(ctx, cli); err != nil {
		cli.Close()
		return nil, err
	}
	return &driver{c: cli, prefix: c.prefix, fair: c.fair, wake: newWaker(cli), caps: capabilities(c.fair)}, nil
}

// capabilities of a single instance or cluster: asynchronous replication
// makes it AP, and a failover can reset the fencing counter.
func capabilities(fair bool) backends.Capabilities {
	return backends.Capabilities{
		Consistency: backends.AP, FairFIFO: fair, MonotonicTokens: true,
		FencingSurvivesFailover: false, PushWakeup: true, MinTTL: time.Millisecond,
	}
}

// hosts splits a comma-separated host list.
func hosts(u *url.URL) ([]string, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("%w: %s:// needs host:port[,host:port...]", padlock.ErrInvalidURL, u.Scheme)
	}
	var out []string
	for _, h := range strings.Split(u.Host, ",") {
		if host, port, err := net.SplitHostPort(h); err != nil || host == "" || port == "" {
			return nil, fmt.Errorf("%w: %q in %s:// is not host:port", padlock.ErrInvalidURL, h, u.Scheme)
		}
		out = append(out, h)
	}
	return out, nil
}

func ping(ctx context.Context, c goredis.UniversalClient) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("%w: redis: %v", padlock.ErrUnavailable, err)
	}
	return nil
}

// classifyParse maps go-redis URL errors onto padlock's sentinels: an
// unknown option is ErrInvalidOption, anything else ErrInvalidURL.
func classifyParse(err error) error {
	if strings.Contains(err.Error(), "unexpected option") || strings.Contains(err.Error(), "invalid ") {
		return fmt.Errorf("%w: %v", padlock.ErrInvalidOption, err)
	}
	return fmt.Errorf("%w: %v", padlock.ErrInvalidURL, err)
}
