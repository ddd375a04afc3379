package testserver

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ZooKeeperEnsemble is one ZooKeeper server, or an ensemble of them, from
// the Debian zookeeper package, each in its own JVM, on loopback ports.
type ZooKeeperEnsemble struct {
	*Group[*ZooKeeper]
}

// ZooKeeper is one server process.
type ZooKeeper struct {
	*Process
	Addr string // 127.0.0.1:port for clients
}

// ZooKeeperTick is the ensembles' tickTime: short, so that session
// timeouts (2 to 20 ticks) suit tests: 200ms to 2s.
const ZooKeeperTick = 100 * time.Millisecond

// zkClasspath is where the Debian package puts ZooKeeper and its jars.
const zkClasspath = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/*"

// StartZooKeeper starts n servers (1: standalone; 3: an ensemble) and waits
// until each serves clients (the four-letter srvr names its mode).
func StartZooKeeper(ctx context.Context, n int) (*ZooKeeperEnsemble, error) {
	return retryStart(ctx, func(ctx context.Context) (*ZooKeeperEnsemble, error) { return startZooKeeper(ctx, n) })
}

func startZooKeeper(ctx context.Context, n int) (*ZooKeeperEnsemble, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("%w: java (Debian package zookeeper brings it)", ErrMissing)
	}
	if _, err := os.Stat("/usr/share/java/zookeeper.jar"); err != nil {
		return nil, fmt.Errorf("%w: /usr/share/java/zookeeper.jar (Debian package zookeeper)", ErrMissing)
	}
	grp, err := newGroup[*ZooKeeper]("padlock-zk-")
	if err != nil {
		return nil, err
	}
	e := &ZooKeeperEnsemble{grp}
	if err := e.start(ctx, java, n); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func (e *ZooKeeperEnsemble) start(ctx context.Context, java string, n int) error {
	type ports struct{ client, peer, election int }
	var ps []ports
	var servers []string
	for i := 1; i <= n; i++ {
		var p ports
		for _, port := range []*int{&p.client, &p.peer, &p.election} {
			var err error
			if *port, err = FreePort(); err != nil {
				return err
			}
		}
		ps = append(ps, p)
		servers = append(servers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i, p.peer, p.election))
	}
	for i, p := range ps {
		dir := filepath.Join(e.Dir(), fmt.Sprintf("zk%d", i+1))
		data := filepath.Join(dir, "data")
		if err := os.MkdirAll(data, 0o755); err != nil {
			return err
		}
		cfg := []string{
			fmt.Sprintf("tickTime=%d", ZooKeeperTick.Milliseconds()),
			"initLimit=100", "syncLimit=50",
			"dataDir=" + data,
			fmt.Sprintf("clientPort=%d", p.client),
			"clientPortAddress=127.0.0.1",
			"4lw.commands.whitelist=ruok,srvr,mntr,conf,cons",
			"admin.enableServer=false",
			"reconfigEnabled=false",
			"maxClientCnxns=0",
		}
		if n > 1 {
			cfg = append(cfg, servers...)
			if err := os.WriteFile(filepath.Join(data, "myid"), []byte(fmt.Sprintf("%d\n", i+1)), 0o644); err != nil {
				return err
			}
		}
		conf := filepath.Join(dir, "zoo.cfg")
		if err := os.WriteFile(conf, []byte(strings.Join(cfg, "\n")+"\n"), 0o644); err != nil {
			return err
		}
		z := &ZooKeeper{Addr: fmt.Sprintf("127.0.0.1:%d", p.client)}
		z.Process = &Process{
			Name: fmt.Sprintf("zk%d", i+1), Path: java, Dir: dir,
			Args: []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
				"-Dzookeeper.log.dir=" + dir,
				// Empty lock parents (container nodes) go within a second.
				"-Dznode.container.checkIntervalMs=500",
				"-Dznode.container.maxPerMinute=100000",
				"-cp", zkClasspath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", conf},
			Probe: z.serving,
		}
		e.Nodes = append(e.Nodes, z)
	}
	return e.startAll(ctx)
}

// serving is the readiness probe: srvr answers with the server's mode
// (standalone, leader or follower) once it serves clients.
func (z *ZooKeeper) serving(ctx context.Context) error {
	out, err := z.FourLetter(ctx, "srvr")
	if err != nil {
		return err
	}
	if !strings.Contains(out, "Mode: ") {
		return fmt.Errorf("%s not serving: %q", z.Addr, out)
	}
	return nil
}

// Mode returns the server's mode: standalone, leader or follower.
func (z *ZooKeeper) Mode(ctx context.Context) (string, error) {
	out, err := z.FourLetter(ctx, "srvr")
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return m, nil
		}
	}
	return "", fmt.Errorf("%s: no mode in %q", z.Addr, out)
}

// FourLetter sends one of ZooKeeper's four-letter commands and returns the
// answer.
func (z *ZooKeeper) FourLetter(ctx context.Context, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", z.Addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := c.Write([]byte(cmd)); err != nil {
		return "", err
	}
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String(), nil
		}
	}
}

// Addrs returns the servers' client addresses, comma-separated, as a zk://
// URL host wants them.
func (e *ZooKeeperEnsemble) Addrs() string {
	var a []string
	for _, z := range e.Nodes {
		a = append(a, z.Addr)
	}
	return strings.Join(a, ",")
}
