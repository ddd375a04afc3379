package padlocktest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/padlock-go/padlock/conformance"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// startupTimeout bounds a container's first start (an image's first run
// initialises its database).
const startupTimeout = 3 * time.Minute

// Images the containers provider runs, each overridable by an environment
// variable (PADLOCK_IMAGE_ETCD and so on) for a registry mirror or another
// version.
var images = map[Kind]string{
	Etcd:      "gcr.io/etcd-development/etcd:v3.5.14",
	Redis:     "redis:7.4",
	ZooKeeper: "zookeeper:3.9",
	Postgres:  "postgres:17",
	MySQL:     "mariadb:11.4",
}

// image is the image for kind, after its environment override.
func image(kind Kind) string {
	env := map[Kind]string{Etcd: "ETCD", Redis: "REDIS", ZooKeeper: "ZOOKEEPER", Postgres: "POSTGRES", MySQL: "MYSQL"}[kind]
	if v := os.Getenv("PADLOCK_IMAGE_" + env); v != "" {
		return v
	}
	return images[kind]
}

// containersAvailable says why no container engine can be used (nil: one
// answers). testcontainers-go probes the engine without a context, so the
// probe runs aside and an engine that accepts but never answers is given
// up on after ten seconds (the probe's goroutine ends when it does).
func containersAvailable(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res := make(chan error, 1)
	go func() {
		p, err := testcontainers.NewDockerProvider()
		if err == nil {
			err = p.Health(ctx) // closes p
		}
		res <- err
	}()
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return fmt.Errorf("the container engine did not answer: %w", ctx.Err())
	}
}

// containersSupport says why the containers provider cannot run kind with
// the options c (nil: it can).
func containersSupport(kind Kind, c config) error {
	switch {
	case kind == RedisSentinel:
		return fmt.Errorf("%w: a Redis Sentinel server in containers (Sentinel announces container addresses); use %s=%s",
			ErrUnsupported, ServersEnv, ProviderLocal)
	case kind == RedisCluster:
		return fmt.Errorf("%w: a Redis Cluster in containers (its nodes announce container addresses); use %s=%s",
			ErrUnsupported, ServersEnv, ProviderLocal)
	case c.nodes > 1 && kind != RedLock:
		return fmt.Errorf("%w: a %d-node %s in containers (one node each; use %s=%s for clusters)",
			ErrUnsupported, c.nodes, kind, ServersEnv, ProviderLocal)
	case c.tls != nil || len(c.redisUsers) > 0 || c.etcdTokenTTL != 0 || c.fakeClock || c.partitions || c.redisAOF || c.keyspace != "":
		return fmt.Errorf("%w: TLS, RedisUsers, EtcdAuthTokenTTL, FakeClock, Partitions, RedisAppendOnly and RedisKeyspaceEvents in containers; use %s=%s",
			ErrUnsupported, ServersEnv, ProviderLocal)
	}
	return nil
}

// containerSpec is how to run and check one node of a kind.
type containerSpec struct {
	image string
	port  string // the container's client port, "6379/tcp"
	env   map[string]string
	cmd   []string
	wait  wait.Strategy
	// ready is polled (on the node's stable address) after the wait
	// strategy until it returns nil. Every kind has one: after a restart
	// the wait strategy can match the log of the run before.
	ready func(ctx context.Context, addr string) error
}

// startContainers starts kind in containers. Each node is reached through
// a proxy on a fixed loopback port of this machine, so that its address,
// and the server's URL, stay the same when a restart maps the container's
// port anew.
func startContainers(ctx context.Context, kind Kind, c config) (*Server, error) {
	if err := containersSupport(kind, c); err != nil {
		return nil, err
	}
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, err
	}
	s := &Server{}
	var nodes []*containerNode
	s.close = func() {
		for _, n := range nodes {
			n.terminate()
		}
		cli.Close()
	}
	_, s.urlFor = containerKind(kind)
	for range c.nodes {
		spec, _ := containerKind(kind) // each node its own wait strategy: they keep state
		n := &containerNode{spec: spec, cli: cli}
		nodes = append(nodes, n)
		if err := n.run(ctx); err != nil {
			s.close()
			return nil, err
		}
		s.nodes = append(s.nodes, &Node{Addr: n.front.Listen, ops: n})
	}
	switch kind {
	case Postgres:
		admin := "postgres://postgres:postgres@" + s.nodes[0].Addr + "/postgres?sslmode=disable"
		if err := createPostgresAppDB(ctx, admin); err != nil {
			s.close()
			return nil, err
		}
		s.adminURL = "postgres://postgres:postgres@" + s.nodes[0].Addr + "/padlock?sslmode=disable"
		s.adminDSN = s.adminURL
	case MySQL:
		if err := createMariaAppDB(ctx, "root:root@tcp("+s.nodes[0].Addr+")/", false, false); err != nil {
			s.close()
			return nil, err
		}
		s.adminURL = "mysql://admin:admin@" + s.nodes[0].Addr + "/padlock"
		s.adminDSN = "admin:admin@tcp(" + s.nodes[0].Addr + ")/padlock"
	}
	return s, nil
}

// containerKind is the container and URL of one node of kind.
func containerKind(kind Kind) (containerSpec, func(hosts string) string) {
	spec := containerSpec{image: image(kind)}
	switch kind {
	case Etcd:
		spec.port = "2379/tcp"
		spec.cmd = []string{"etcd", "--name", "n1", "--data-dir", "/var/lib/etcd",
			"--listen-client-urls", "http://0.0.0.0:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
			"--auto-compaction-mode", "revision", "--auto-compaction-retention", "100000"}
		spec.wait = wait.ForLog("ready to serve client requests").WithStartupTimeout(startupTimeout)
		spec.ready = etcdHealthy
		return spec, hostsURL("etcd", "", nil)
	case Redis, RedLock:
		spec.image = image(Redis)
		spec.port = "6379/tcp"
		spec.cmd = []string{"redis-server", "--save", "", "--appendonly", "no", "--protected-mode", "no"}
		spec.wait = wait.ForLog("Ready to accept connections").WithStartupTimeout(startupTimeout)
		spec.ready = redisPong
		return spec, hostsURL(string(kind), "", nil)
	case ZooKeeper:
		spec.port = "2181/tcp"
		spec.env = map[string]string{
			"ZOO_TICK_TIME":               fmt.Sprint(ZooKeeperTick.Milliseconds()),
			"ZOO_4LW_COMMANDS_WHITELIST":  "ruok,srvr,mntr,conf,cons",
			"ZOO_ADMINSERVER_ENABLED":     "false",
			"ZOO_MAX_CLIENT_CNXNS":        "0",
			"JVMFLAGS":                    "-Dznode.container.checkIntervalMs=500 -Dznode.container.maxPerMinute=100000",
			"ZOO_STANDALONE_ENABLED":      "true",
			"ZOO_CFG_EXTRA":               "reconfigEnabled=false",
			"ZOO_AUTOPURGE_PURGEINTERVAL": "0",
		}
		spec.wait = wait.ForListeningPort("2181/tcp").WithStartupTimeout(startupTimeout)
		spec.ready = func(ctx context.Context, addr string) error { return (&zkNode{Addr: addr}).serving(ctx) }
		return spec, hostsURL("zk", "", nil)
	case Postgres:
		spec.port = "5432/tcp"
		spec.env = map[string]string{"POSTGRES_PASSWORD": "postgres"}
		spec.cmd = []string{"postgres", "-c", "max_connections=1000", "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "wal_level=logical", "-c", "max_wal_senders=32", "-c", "max_replication_slots=32"}
		// The image's first start runs a temporary server, then the real one.
		spec.wait = wait.ForLog("database system is ready to accept connections").WithOccurrence(2).
			WithStartupTimeout(startupTimeout)
		spec.ready = func(ctx context.Context, addr string) error {
			return (&pgServer{}).selectOne(ctx, "postgres://postgres:postgres@"+addr+"/postgres?sslmode=disable")
		}
		return spec, func(hosts string) string {
			return "postgres://padlock:padlock@" + hosts + "/padlock?sslmode=disable"
		}
	default: // MySQL
		spec.port = "3306/tcp"
		// MYSQL_* names, which the mariadb image reads too, so that
		// PADLOCK_IMAGE_MYSQL may name a MySQL image.
		spec.env = map[string]string{"MYSQL_ROOT_PASSWORD": "root", "MYSQL_DATABASE": "padlock",
			"MYSQL_ROOT_HOST": "%"}
		spec.cmd = []string{"--max-connections=400", "--performance-schema=ON", "--skip-name-resolve",
			"--innodb-flush-log-at-trx-commit=2"}
		spec.wait = wait.ForListeningPort("3306/tcp").WithStartupTimeout(startupTimeout)
		spec.ready = func(ctx context.Context, addr string) error { return ping(ctx, "root:root@tcp("+addr+")/") }
		return spec, func(hosts string) string { return "mysql://padlock:padlock@" + hosts + "/padlock" }
	}
}

// etcdHealthy is etcd's readiness: its /health endpoint, on the client
// port, says it has a leader and serves.
func etcdHealthy(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
		return fmt.Errorf("etcd /health: %s %s", resp.Status, body)
	}
	return nil
}

// redisPong is Redis's readiness: PING answered with PONG.
func redisPong(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("redis PING: %q", line)
	}
	return nil
}

// containerNode is one container behind a proxy on a fixed local port.
type containerNode struct {
	spec  containerSpec
	cli   *testcontainers.DockerClient
	mu    sync.Mutex
	ctr   *testcontainers.DockerContainer
	front *toxiproxy.Proxy
}

// run creates and starts the container, and its front proxy.
func (n *containerNode) run(ctx context.Context) error {
	opts := []testcontainers.ContainerCustomizer{
		testcontainers.WithExposedPorts(n.spec.port),
		testcontainers.WithWaitStrategy(n.spec.wait),
	}
	if localEngine() {
		// Published on loopback only, as the local provider listens: the
		// servers have well-known passwords, or none.
		opts = append(opts, testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			port, err := network.ParsePort(n.spec.port)
			if err == nil {
				hc.PortBindings = network.PortMap{port: {{HostIP: netip.MustParseAddr("127.0.0.1")}}}
			}
		}))
	}
	if len(n.spec.env) > 0 {
		opts = append(opts, testcontainers.WithEnv(n.spec.env))
	}
	if len(n.spec.cmd) > 0 {
		opts = append(opts, testcontainers.WithCmd(n.spec.cmd...))
	}
	ctr, err := testcontainers.Run(ctx, n.spec.image, opts...)
	n.ctr = ctr // set even on error, so that terminate removes it
	if err != nil {
		return fmt.Errorf("run %s: %w", n.spec.image, err)
	}
	up, err := ctr.PortEndpoint(ctx, n.spec.port, "")
	if err != nil {
		return err
	}
	n.front = toxiproxy.NewProxy(proxies, fmt.Sprintf("padlocktest-front-%d", proxySeq.Add(1)), "127.0.0.1:0", up)
	if err := n.front.Start(); err != nil {
		n.front = nil
		return err
	}
	return n.ready(ctx)
}

// ready polls the spec's readiness check through the front proxy.
func (n *containerNode) ready(ctx context.Context) error {
	var err error
	if perr := conformance.Poll(ctx, 100*time.Millisecond, func() bool { err = n.spec.ready(ctx, n.front.Listen); return err == nil }); perr != nil {
		return fmt.Errorf("%s not ready: %w (last check: %v)", n.spec.image, perr, err)
	}
	return nil
}

// Start starts a killed or stopped container, points the front proxy at
// its (possibly new) mapped port, and waits until it serves. The
// container is started by the engine's API, not testcontainers-go's Start,
// whose wait strategies would match the log of the run before.
func (n *containerNode) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.running(ctx) {
		return fmt.Errorf("%s already running", n.spec.image)
	}
	if _, err := n.cli.ContainerStart(ctx, n.ctr.GetContainerID(), client.ContainerStartOptions{}); err != nil {
		return err
	}
	up, err := n.ctr.PortEndpoint(ctx, n.spec.port, "")
	if err != nil {
		return err
	}
	n.front.Upstream = up // stopped since the Kill or Stop
	if err := n.front.Start(); err != nil {
		return err
	}
	return n.ready(ctx)
}

// Stop stops the container (SIGTERM, then SIGKILL after ten seconds), and
// the front proxy, so that the node's address refuses connections.
func (n *containerNode) Stop() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.front.Stop()
	timeout := 10
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := n.cli.ContainerStop(ctx, n.ctr.GetContainerID(), client.ContainerStopOptions{Timeout: &timeout})
	return err
}

// Kill kills the container's processes with SIGKILL, and stops the front
// proxy, so that the node's address refuses connections; the container
// and its data stay, for Start. A paused container is killed frozen: the
// engine sends the signal before it thaws it.
func (n *containerNode) Kill() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.front.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !n.running(ctx) {
		return nil
	}
	id := n.ctr.GetContainerID()
	_, err := n.cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"})
	if cerrdefs.IsConflict(err) {
		// An engine that refuses to kill a paused container.
		n.cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{})
		_, err = n.cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"})
	}
	if err != nil {
		return err
	}
	if err := conformance.Poll(ctx, 50*time.Millisecond, func() bool { return !n.running(ctx) }); err != nil {
		return fmt.Errorf("%s still running after SIGKILL: %w", n.spec.image, err)
	}
	return nil
}

// Pause freezes the container's processes (the engine's cgroup freezer).
func (n *containerNode) Pause() error {
	_, err := n.cli.ContainerPause(context.Background(), n.ctr.GetContainerID(), client.ContainerPauseOptions{})
	return err
}

// Resume thaws a paused container.
func (n *containerNode) Resume() error {
	_, err := n.cli.ContainerUnpause(context.Background(), n.ctr.GetContainerID(), client.ContainerUnpauseOptions{})
	return err
}

// Restart kills the container and starts it again.
func (n *containerNode) Restart(ctx context.Context) error {
	if err := n.Kill(); err != nil {
		return err
	}
	return n.Start(ctx)
}

// Running reports whether the container runs (a paused one does).
func (n *containerNode) Running() bool { return n.running(context.Background()) }

func (n *containerNode) running(ctx context.Context) bool {
	st, err := n.ctr.State(ctx)
	return err == nil && st.Running
}

// terminate removes the container and stops the front proxy.
func (n *containerNode) terminate() {
	if n.front != nil {
		n.front.Stop()
	}
	if n.ctr == nil {
		return
	}
	if err := testcontainers.TerminateContainer(n.ctr); err != nil {
		// Terminate gives up before removing when its stop fails.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, rerr := n.cli.ContainerRemove(ctx, n.ctr.GetContainerID(), client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if rerr != nil && !cerrdefs.IsNotFound(rerr) {
			fmt.Fprintln(os.Stderr, "padlocktest: removing container:", errors.Join(err, rerr))
		}
	}
}

// localEngine reports whether the container engine runs on this machine
// (a Unix socket), where published ports can be bound to loopback.
func localEngine() bool {
	h := os.Getenv("DOCKER_HOST")
	return os.Getenv("TESTCONTAINERS_HOST_OVERRIDE") == "" && (h == "" || strings.HasPrefix(h, "unix://"))
}
