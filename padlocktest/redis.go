package padlocktest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/padlock-go/padlock/conformance"
)

// Redis is one redis-server process.
type redisNode struct {
	*process
	Addr string // 127.0.0.1:port
}

// redisGroup is a set of redis-server processes: independent masters, or the
// masters of one Redis Cluster.
type redisGroup struct {
	*group[*redisNode]
}

// startRedisN starts n independent redis-server masters, persisting
// nothing unless o.aof, each under a fake clock if o.fake.
func startRedisN(ctx context.Context, n int, o redisOpts) (*redisGroup, error) {
	return retryStart(ctx, func(ctx context.Context) (*redisGroup, error) { return startRedis(ctx, n, o) })
}

// startRedisClusterN starts an n-master Redis Cluster (no replicas) and waits
// until every node reports cluster_state:ok.
func startRedisClusterN(ctx context.Context, n int, o redisOpts) (*redisGroup, error) {
	return retryStart(ctx, func(ctx context.Context) (*redisGroup, error) { return startRedisCluster(ctx, n, o) })
}

func startRedisCluster(ctx context.Context, n int, o redisOpts) (*redisGroup, error) {
	o.cluster = true
	g, err := startRedis(ctx, n, o)
	if err != nil {
		return nil, err
	}
	args := []string{"--cluster", "create"}
	for _, r := range g.Nodes {
		args = append(args, r.Addr)
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		g.Close()
		return nil, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := g.clusterOK(ctx); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

// clusterOK waits until every node of a cluster reports cluster_state:ok.
func (g *redisGroup) clusterOK(ctx context.Context) error {
	for _, r := range g.Nodes {
		if err := conformance.Poll(ctx, 50*time.Millisecond, func() bool {
			out, _ := r.CLI(ctx, "cluster", "info")
			return strings.Contains(out, "cluster_state:ok")
		}); err != nil {
			return fmt.Errorf("redis cluster node %s never became ok: %w", r.Addr, err)
		}
	}
	return nil
}

// redisOpts shape a group of redis-server processes: the masters of a
// Redis Cluster, nodes under a fake clock, a primary (the first node)
// and replicas of it (the others), nodes that sync every write to their
// append-only file before answering (aof).
type redisOpts struct {
	cluster, fake, replicas, aof bool
	keyspace                     string // notify-keyspace-events, if set
}

func startRedis(ctx context.Context, n int, o redisOpts) (*redisGroup, error) {
	bin, err := redisBin()
	if err != nil {
		return nil, err
	}
	grp, err := newGroup[*redisNode]("padlock-redis-")
	if err != nil {
		return nil, err
	}
	g := &redisGroup{grp}
	for i := range n {
		port, err := FreePort()
		if err != nil {
			g.Close()
			return nil, err
		}
		ndir := filepath.Join(g.Dir(), fmt.Sprintf("r%d", i+1))
		if err := os.MkdirAll(ndir, 0o755); err != nil {
			g.Close()
			return nil, err
		}
		// Users live in an ACL file (empty at first), so that a test that
		// adds users and saves them (ACL SAVE) finds them again after a
		// restart, before any client can log in.
		aclFile := filepath.Join(ndir, "users.acl")
		if err := os.WriteFile(aclFile, nil, 0o644); err != nil {
			g.Close()
			return nil, err
		}
		aof := []string{"--appendonly", "no"}
		if o.aof {
			aof = []string{"--appendonly", "yes", "--appendfsync", "always"}
		}
		args := append([]string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--dir", ndir,
			"--save", "", "--daemonize", "no", "--protected-mode", "no",
			"--logfile", "", "--aclfile", aclFile}, aof...)
		if o.keyspace != "" {
			args = append(args, "--notify-keyspace-events", o.keyspace)
		}
		if o.replicas {
			// A full sync starts at once, rather than after Redis's 5s
			// wait for more replicas to share it.
			args = append(args, "--repl-diskless-sync-delay", "0")
			if i > 0 {
				args = append(args, "--replicaof", "127.0.0.1", strings.TrimPrefix(g.Nodes[0].Addr, "127.0.0.1:"))
			}
		}
		if o.cluster {
			// The bus port is chosen too, rather than Redis's port+10000,
			// which nothing reserved.
			bus, err := FreePort()
			if err != nil {
				g.Close()
				return nil, err
			}
			args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", "2000", "--cluster-port", fmt.Sprint(bus))
		}
		r := &redisNode{Addr: fmt.Sprintf("127.0.0.1:%d", port), process: &process{
			Name: fmt.Sprintf("redis-%d", port), Path: bin, Args: args, Dir: ndir,
			Ready: "Ready to accept connections"}}
		r.Probe = r.ping
		if o.fake {
			if r.clock, r.Env, err = newFakeClock(ndir); err != nil {
				g.Close()
				return nil, err
			}
		}
		g.Nodes = append(g.Nodes, r)
	}
	if err := g.startAll(ctx); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

// redisBin finds redis-server, and checks that redis-cli (which makes a
// cluster) is there too.
func redisBin() (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("%w: redis-server (Debian package redis-server)", ErrMissing)
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		return "", fmt.Errorf("%w: redis-cli (Debian package redis-tools)", ErrMissing)
	}
	return bin, nil
}

// Addrs returns the nodes' addresses, comma-separated, as padlock's Redis
// URLs want them.
func (g *redisGroup) Addrs() string {
	var a []string
	for _, r := range g.Nodes {
		a = append(a, r.Addr)
	}
	return strings.Join(a, ",")
}

// CLI runs redis-cli against the node and returns its output.
func (r *redisNode) CLI(ctx context.Context, args ...string) (string, error) {
	host, port, _ := strings.Cut(r.Addr, ":")
	out, err := exec.CommandContext(ctx, "redis-cli", append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
	return string(out), err
}

// ping is the node's readiness probe: the server answers PING.
func (r *redisNode) ping(ctx context.Context) error {
	out, err := r.CLI(ctx, "ping")
	if err != nil || !strings.Contains(out, "PONG") {
		return fmt.Errorf("redis-cli ping %s: %v %s", r.Addr, err, out)
	}
	return nil
}

// startRedisUsers starts one redis-server whose users are those given, each
// the rest of a redis.conf `user` line (none: the default user only, with
// all rights; some: the default user is off). With c, it accepts TLS only
// and requires a client certificate signed by c's CA; its Addr is then the
// TLS port.
func startRedisUsers(ctx context.Context, c *Certs, users ...string) (*redisGroup, error) {
	return retryStart(ctx, func(ctx context.Context) (*redisGroup, error) {
		g, bin, port, err := oneRedis("padlock-redis-users-")
		if err != nil {
			return nil, err
		}
		conf := ""
		if len(users) > 0 {
			conf = "user default off\n"
		}
		for _, u := range users {
			conf += "user " + u + "\n"
		}
		confFile := filepath.Join(g.Dir(), "redis.conf")
		if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
			g.Close()
			return nil, err
		}
		listen := []string{"--port", fmt.Sprint(port)}
		if c != nil {
			listen = []string{"--port", "0", "--tls-port", fmt.Sprint(port), "--tls-cert-file", c.ServerCert,
				"--tls-key-file", c.ServerKey, "--tls-ca-cert-file", c.CA, "--tls-auth-clients", "yes"}
		}
		args := append([]string{confFile, "--bind", "127.0.0.1",
			"--dir", g.Dir(), "--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no",
			"--logfile", ""}, listen...)
		return g.startOne(ctx, &redisNode{Addr: fmt.Sprintf("127.0.0.1:%d", port), process: &process{
			Name: fmt.Sprintf("redis-%d", port), Path: bin, Args: args, Dir: g.Dir(),
			Ready: "Ready to accept connections"}})
	})
}

// oneRedis makes the group of one redis-server process to come: its
// directory (named after prefix), the binary and a free port.
func oneRedis(prefix string) (*redisGroup, string, int, error) {
	bin, err := redisBin()
	if err != nil {
		return nil, "", 0, err
	}
	grp, err := newGroup[*redisNode](prefix)
	if err != nil {
		return nil, "", 0, err
	}
	g := &redisGroup{grp}
	port, err := FreePort()
	if err != nil {
		g.Close()
		return nil, "", 0, err
	}
	return g, bin, port, nil
}

// startOne starts r as g's one node, and closes g if it does not start.
func (g *redisGroup) startOne(ctx context.Context, r *redisNode) (*redisGroup, error) {
	g.Nodes = append(g.Nodes, r)
	if err := g.startAll(ctx); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}
