package testserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ErrMissing is returned when a server binary is not installed; tests skip on
// it unless RequireServers says a missing server is a failure.
var ErrMissing = errors.New("testserver: server binary not installed")

// Redis is one redis-server process.
type Redis struct {
	*Process
	Addr string // 127.0.0.1:port
}

// RedisGroup is a set of redis-server processes: independent masters, or the
// masters of one Redis Cluster.
type RedisGroup struct {
	*Group[*Redis]
}

// StartRedis starts n independent redis-server masters without persistence.
func StartRedis(ctx context.Context, n int) (*RedisGroup, error) {
	return retryStart(ctx, func(ctx context.Context) (*RedisGroup, error) { return startRedis(ctx, n, false) })
}

// StartRedisCluster starts an n-master Redis Cluster (no replicas) and waits
// until every node reports cluster_state:ok.
func StartRedisCluster(ctx context.Context, n int) (*RedisGroup, error) {
	return retryStart(ctx, func(ctx context.Context) (*RedisGroup, error) { return startRedisCluster(ctx, n) })
}

func startRedisCluster(ctx context.Context, n int) (*RedisGroup, error) {
	g, err := startRedis(ctx, n, true)
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
	for _, r := range g.Nodes {
		if err := waitFor(ctx, func() bool {
			out, _ := r.CLI(ctx, "cluster", "info")
			return strings.Contains(out, "cluster_state:ok")
		}); err != nil {
			g.Close()
			return nil, fmt.Errorf("redis cluster node %s never became ok: %w", r.Addr, err)
		}
	}
	return g, nil
}

func startRedis(ctx context.Context, n int, cluster bool) (*RedisGroup, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("%w: redis-server (Debian package redis-server)", ErrMissing)
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		return nil, fmt.Errorf("%w: redis-cli (Debian package redis-tools)", ErrMissing)
	}
	grp, err := newGroup[*Redis]("padlock-redis-")
	if err != nil {
		return nil, err
	}
	g := &RedisGroup{grp}
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
		args := []string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--dir", ndir,
			"--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no",
			"--logfile", ""}
		if cluster {
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
		r := &Redis{Addr: fmt.Sprintf("127.0.0.1:%d", port), Process: &Process{
			Name: fmt.Sprintf("redis-%d", port), Path: bin, Args: args, Dir: ndir,
			Ready: "Ready to accept connections"}}
		r.Probe = r.ping
		g.Nodes = append(g.Nodes, r)
	}
	if err := g.startAll(ctx); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

// Addrs returns the nodes' addresses, comma-separated, as padlock's Redis
// URLs want them.
func (g *RedisGroup) Addrs() string {
	var a []string
	for _, r := range g.Nodes {
		a = append(a, r.Addr)
	}
	return strings.Join(a, ",")
}

// CLI runs redis-cli against the node and returns its output.
func (r *Redis) CLI(ctx context.Context, args ...string) (string, error) {
	host, port, _ := strings.Cut(r.Addr, ":")
	out, err := exec.CommandContext(ctx, "redis-cli", append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
	return string(out), err
}

// ping is the node's readiness probe: the server answers PING.
func (r *Redis) ping(ctx context.Context) error {
	out, err := r.CLI(ctx, "ping")
	if err != nil || !strings.Contains(out, "PONG") {
		return fmt.Errorf("redis-cli ping %s: %v %s", r.Addr, err, out)
	}
	return nil
}

// waitFor polls ok until it holds or ctx ends.
func waitFor(ctx context.Context, ok func() bool) error {
	for !ok() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// StartRedisTLS starts one redis-server that accepts TLS only, requires a
// client certificate signed by c's CA, and authenticates with the ACL
// users given, each the rest of a redis.conf `user` line (the default user
// is off). Its Addr is the TLS port.
func StartRedisTLS(ctx context.Context, c *Certs, users ...string) (*RedisGroup, error) {
	return retryStart(ctx, func(ctx context.Context) (*RedisGroup, error) {
		bin, err := exec.LookPath("redis-server")
		if err != nil {
			return nil, fmt.Errorf("%w: redis-server (Debian package redis-server)", ErrMissing)
		}
		grp, err := newGroup[*Redis]("padlock-redis-tls-")
		if err != nil {
			return nil, err
		}
		g := &RedisGroup{grp}
		port, err := FreePort()
		if err != nil {
			g.Close()
			return nil, err
		}
		conf := "user default off\n"
		for _, u := range users {
			conf += "user " + u + "\n"
		}
		confFile := filepath.Join(g.Dir(), "redis.conf")
		if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
			g.Close()
			return nil, err
		}
		args := []string{confFile, "--port", "0", "--tls-port", fmt.Sprint(port), "--bind", "127.0.0.1",
			"--dir", g.Dir(), "--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no",
			"--logfile", "", "--tls-cert-file", c.ServerCert, "--tls-key-file", c.ServerKey,
			"--tls-ca-cert-file", c.CA, "--tls-auth-clients", "yes"}
		g.Nodes = append(g.Nodes, &Redis{Addr: fmt.Sprintf("127.0.0.1:%d", port), Process: &Process{
			Name: fmt.Sprintf("redis-tls-%d", port), Path: bin, Args: args, Dir: g.Dir(),
			Ready: "Ready to accept connections"}})
		if err := g.startAll(ctx); err != nil {
			g.Close()
			return nil, err
		}
		return g, nil
	})
}
