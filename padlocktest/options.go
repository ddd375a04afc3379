package padlocktest

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// Providers: where servers come from.
const (
	// ProviderLocal runs servers from binaries on this machine (the Debian
	// packages, or PATH), and etcd from padlock's embedded etcd v3.7.
	ProviderLocal = "local"
	// ProviderContainers runs servers in containers through
	// testcontainers-go, on whatever engine it finds (Docker, Podman...).
	ProviderContainers = "containers"
	// ProviderAuto is ProviderLocal when the kind's binaries are here, else
	// ProviderContainers when a container engine answers.
	ProviderAuto = "auto"
)

// ServersEnv is the environment variable that chooses the provider:
// local, containers or auto (the default).
const ServersEnv = "PADLOCK_SERVERS"

// RequireServers reports whether a missing server must fail the run instead
// of skipping (PADLOCK_REQUIRE_SERVERS=1, as padlock's CI sets it).
func RequireServers() bool { return os.Getenv("PADLOCK_REQUIRE_SERVERS") == "1" }

// Option configures a server beyond its kind.
type Option func(*config)

type config struct {
	nodes        int // 0: the kind's default
	nodesSet     bool
	tls          *Certs
	redisUsers   []string
	etcdTokenTTL int
	provider     string
	fakeClock    bool
	partitions   bool
	redisAOF     bool
	keyspace     string // notify-keyspace-events
}

// Nodes sets how many nodes the server has: etcd members, ZooKeeper
// servers (an ensemble), RedLock masters or Redis Cluster masters. Redis,
// Postgres and MySQL have one.
func Nodes(n int) Option { return func(c *config) { c.nodes, c.nodesSet = n, true } }

// TLS makes the server take clients over TLS only, with certs' server
// certificate, and require a client certificate signed by certs' CA
// (mutual TLS). The server's URL carries the matching client settings.
// Local provider only; Etcd, Redis, ZooKeeper (its TLS port: the URL is
// zks://), Postgres and MySQL.
func TLS(certs *Certs) Option { return func(c *config) { c.tls = certs } }

// RedisUsers replaces a Redis server's users: the default user is off,
// and each rule is the rest of a redis.conf "user" line, such as
// "app on >secret ~app:* +@all". Local provider only.
func RedisUsers(rules ...string) Option { return func(c *config) { c.redisUsers = rules } }

// EtcdAuthTokenTTL sets the lifetime of etcd's auth tokens in seconds, to
// test token renewal; password hashes are then cheap (bcrypt cost 4), so
// that logins keep up on a loaded machine. Authentication itself is
// enabled by the test, over etcd's API. Local provider only.
func EtcdAuthTokenTTL(seconds int) Option { return func(c *config) { c.etcdTokenTTL = seconds } }

// FakeClock runs each node of a Redis server (Redis, RedLock or
// RedisCluster) with a wall clock that Node.SetClock can jump or make run
// fast: the faults of Kleppmann's analysis of RedLock. The clock is moved
// by a small LD_PRELOAD library that padlocktest builds with the C
// compiler (libfaketime cannot start inside Debian's redis-server, which
// is linked with jemalloc). Local provider only. Go servers (etcd) cannot
// be faked this way, and ZooKeeper and the databases are not offered.
func FakeClock() Option { return func(c *config) { c.fakeClock = true } }

// RedisAppendOnly makes each node of a Redis server (Redis, RedLock or
// RedisCluster) append every write to its log and sync it to disk before
// it answers (appendonly yes, appendfsync always), so that a restart
// keeps what it acknowledged. Without it the nodes persist nothing.
// Local provider only.
func RedisAppendOnly() Option { return func(c *config) { c.redisAOF = true } }

// RedisKeyspaceEvents starts each node of a Redis server (Redis, RedLock,
// RedisCluster or RedisSentinel's data nodes) with keyspace notifications
// of the given classes (notify-keyspace-events, as redis.conf spells them:
// "KA" for every key event), which Redis leaves off by default, so that a
// test can follow keys as they change (padlock's WatchHolders on Redis).
// Local provider only.
func RedisKeyspaceEvents(flags string) Option { return func(c *config) { c.keyspace = flags } }

// Partitions runs each node of an etcd cluster or a ZooKeeper ensemble on
// a test host of its own: a network namespace that padlocktest makes,
// joined to the test through a bridge, so that Server.Partition can cut
// nodes off from each other while the test still reaches every one. The nodes' addresses are then in
// 10.213.0.0/16, not on loopback. Needs root and iproute2 (ip); local
// provider only.
func Partitions() Option { return func(c *config) { c.partitions = true } }

// Provider chooses the provider for this server, overriding
// PADLOCK_SERVERS.
func Provider(name string) Option { return func(c *config) { c.provider = name } }

// check validates the options against kind, and fills in defaults.
func (c *config) check(kind Kind) error {
	switch kind {
	case Etcd, Redis, ZooKeeper, Postgres, MySQL:
		if !c.nodesSet {
			c.nodes = 1
		}
	case RedLock, RedisCluster:
		if !c.nodesSet {
			c.nodes = 3
		}
	case RedisSentinel:
		if !c.nodesSet {
			c.nodes = 2
		}
	default:
		return fmt.Errorf("%w: kind %q (want one of %v)", ErrInvalid, kind, Kinds)
	}
	switch {
	case c.nodes < 1:
		return fmt.Errorf("%w: Nodes(%d): a server has at least one node", ErrInvalid, c.nodes)
	case c.nodes > 1 && (kind == Redis || kind == Postgres || kind == MySQL):
		return fmt.Errorf("%w: Nodes(%d): a %s server has one node", ErrInvalid, c.nodes, kind)
	case kind == RedisSentinel && c.nodes < 2:
		return fmt.Errorf("%w: Nodes(%d): a Sentinel server has a primary and at least one replica", ErrInvalid, c.nodes)
	case kind == RedisCluster && c.nodes < 3:
		return fmt.Errorf("%w: Nodes(%d): a Redis Cluster has at least three masters", ErrInvalid, c.nodes)
	case c.tls != nil && (kind == RedisCluster || kind == RedLock || kind == RedisSentinel):
		return fmt.Errorf("%w: TLS on %s", ErrUnsupported, kind)
	case c.tls != nil && c.partitions && kind == ZooKeeper:
		return fmt.Errorf("%w: TLS with Partitions on %s: the test certificates name loopback, not the test hosts", ErrUnsupported, kind)
	case len(c.redisUsers) > 0 && kind != Redis:
		return fmt.Errorf("%w: RedisUsers on %s", ErrInvalid, kind)
	case c.etcdTokenTTL != 0 && kind != Etcd:
		return fmt.Errorf("%w: EtcdAuthTokenTTL on %s", ErrInvalid, kind)
	case c.fakeClock && kind != Redis && kind != RedLock && kind != RedisCluster && kind != RedisSentinel:
		return fmt.Errorf("%w: FakeClock on %s: only Redis servers can have their clocks faked", ErrInvalid, kind)
	case c.fakeClock && (c.tls != nil || len(c.redisUsers) > 0):
		return fmt.Errorf("%w: FakeClock with TLS or RedisUsers", ErrUnsupported)
	case c.redisAOF && kind != Redis && kind != RedLock && kind != RedisCluster:
		return fmt.Errorf("%w: RedisAppendOnly on %s", ErrInvalid, kind)
	case c.redisAOF && (c.tls != nil || len(c.redisUsers) > 0):
		return fmt.Errorf("%w: RedisAppendOnly with TLS or RedisUsers", ErrUnsupported)
	case c.keyspace != "" && kind != Redis && kind != RedLock && kind != RedisCluster && kind != RedisSentinel:
		return fmt.Errorf("%w: RedisKeyspaceEvents on %s", ErrInvalid, kind)
	case c.keyspace != "" && (c.tls != nil || len(c.redisUsers) > 0):
		return fmt.Errorf("%w: RedisKeyspaceEvents with TLS or RedisUsers", ErrUnsupported)
	case c.partitions && kind != Etcd && kind != ZooKeeper:
		return fmt.Errorf("%w: Partitions on %s: only etcd and ZooKeeper run on test hosts of their own", ErrInvalid, kind)
	case c.etcdTokenTTL < 0:
		return fmt.Errorf("%w: EtcdAuthTokenTTL(%d)", ErrInvalid, c.etcdTokenTTL)
	}
	return nil
}

// chooseProvider resolves the provider for kind: the Provider option, or
// PADLOCK_SERVERS, or auto.
func chooseProvider(ctx context.Context, kind Kind, c config) (string, error) {
	p := c.provider
	if p == "" {
		p = os.Getenv(ServersEnv)
	}
	switch p {
	case ProviderLocal:
		return p, nil
	case ProviderContainers:
		if err := containersAvailable(ctx); err != nil {
			return "", fmt.Errorf("%w: %s=%s, but no container engine answers: %v", ErrMissing, ServersEnv, p, err)
		}
		return p, nil
	case "", ProviderAuto:
	default:
		return "", fmt.Errorf("%w: provider %q (%s): want %s, %s or %s", ErrInvalid, p, ServersEnv,
			ProviderLocal, ProviderContainers, ProviderAuto)
	}
	missing := localMissing(kind)
	if missing == nil {
		return ProviderLocal, nil
	}
	local := strings.TrimPrefix(missing.Error(), ErrMissing.Error()+": ")
	if err := containersSupport(kind, c); err != nil {
		// Containers would not do either: only the local fix helps.
		return "", fmt.Errorf("%w: no %s here: %s (sudo apt-get install %s); and %v",
			ErrMissing, kind, local, debianPackage(kind), err)
	}
	engine := containersAvailable(ctx)
	if engine == nil {
		return ProviderContainers, nil
	}
	return "", fmt.Errorf("%w: no %s here: %s; and no container engine: %v. Install the server "+
		"(for example sudo apt-get install %s), or run a container engine (Docker or Podman) "+
		"for %s=%s", ErrMissing, kind, local, engine, debianPackage(kind), ServersEnv, ProviderContainers)
}

// debianPackage names the Debian package of a kind's server.
func debianPackage(kind Kind) string {
	switch kind {
	case Redis, RedisCluster, RedLock:
		return "redis-server redis-tools"
	case ZooKeeper:
		return "zookeeper"
	case Postgres:
		return "postgresql"
	case MySQL:
		return "mariadb-server"
	default:
		return "etcd-server"
	}
}
