package padlocktest

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// zkEnsemble is one ZooKeeper server, or an ensemble of them, from
// the Debian zookeeper package, each in its own JVM, on loopback ports.
type zkEnsemble struct {
	*group[*zkNode]
	lab *netLab // with Partitions: a host per server
}

// Close kills the servers, then removes their network lab, if any.
func (e *zkEnsemble) Close() {
	e.group.Close()
	if e.lab != nil {
		e.lab.close()
	}
}

// ZooKeeper is one server process.
type zkNode struct {
	*process
	Addr string      // 127.0.0.1:port for clients
	tls  *tls.Config // with TLS: the client side, for the readiness probe
}

// ZooKeeperTick is the ensembles' tickTime: short, so that the session
// timeouts tests use (ZooKeeperTTL) expire quickly.
const ZooKeeperTick = 100 * time.Millisecond

// ZooKeeperTTL is the lease (session timeout) tests use on a harness's
// servers, standalone or an ensemble: 40 ticks (4s). The sessions must
// outlast a busy machine's pauses of the JVMs: a server that was not
// scheduled for a session timeout expires every session it has when it
// runs again. With 2s standalone, a CI rehearsal saw a FIFO check's holder
// and waiters all vanish from a TLS server at once. The servers grant
// sessions from 2 ticks up to ZooKeeperMaxSession, so that a test that
// asks for a longer lease gets it.
const ZooKeeperTTL = 40 * ZooKeeperTick

// ZooKeeperMaxSession is the longest session timeout a harness's servers
// grant (maxSessionTimeout). It was ZooKeeperTTL once, and a test that
// asked for a longer lease got ZooKeeperTTL without knowing it: a thousand
// acquisitions on one TLS session of 2s, on a loaded machine, saw their
// session expire although they had asked for 10s.
const ZooKeeperMaxSession = 300 * ZooKeeperTick

// zkClasspath is where the Debian package puts ZooKeeper and its jars.
// slf4j-simple comes first: /usr/share/java holds several SLF4J bindings,
// and the one picked otherwise was the no-op one, which left a failed
// election or an expired session with no server log to read. The simple
// binding writes INFO and above to stderr, which the process's log keeps.
const zkClasspath = "/etc/zookeeper/conf:/usr/share/java/slf4j-simple.jar:/usr/share/java/zookeeper.jar:/usr/share/java/*"

// startZooKeeperN starts n servers (1: standalone; 3: an ensemble) and waits
// until each serves clients (the four-letter srvr names its mode).
// With partitions, each server runs on a test host of its own.
// With certs, the servers take clients over TLS only (see zkTLS).
func startZooKeeperN(ctx context.Context, n int, partitions bool, certs *Certs) (*zkEnsemble, error) {
	return retryStart(ctx, func(ctx context.Context) (*zkEnsemble, error) { return startZooKeeper(ctx, n, partitions, certs) })
}

func startZooKeeper(ctx context.Context, n int, partitions bool, certs *Certs) (*zkEnsemble, error) {
	java, err := zkJava()
	if err != nil {
		return nil, err
	}
	grp, err := newGroup[*zkNode]("padlock-zk-")
	if err != nil {
		return nil, err
	}
	e := &zkEnsemble{group: grp}
	if partitions {
		if e.lab, err = newNetLab(n); err != nil {
			e.Close()
			return nil, err
		}
	}
	if err := e.start(ctx, java, n, certs); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// zkJava finds java, and checks that the zookeeper package is installed.
func zkJava() (string, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("%w: java (Debian package zookeeper brings it)", ErrMissing)
	}
	if _, err := os.Stat("/usr/share/java/zookeeper.jar"); err != nil {
		return "", fmt.Errorf("%w: /usr/share/java/zookeeper.jar (Debian package zookeeper)", ErrMissing)
	}
	return java, nil
}

func (e *zkEnsemble) start(ctx context.Context, java string, n int, certs *Certs) error {
	type ports struct{ client, peer, election int }
	var ps []ports
	var servers []string
	host := func(i int) string { // server i's address (0-based)
		if e.lab != nil {
			return e.lab.hosts[i].ip
		}
		return "127.0.0.1"
	}
	for i := 1; i <= n; i++ {
		p := ports{2181, 2888, 3888} // a host of its own: ZooKeeper's own ports are free
		if e.lab == nil {
			for _, port := range []*int{&p.client, &p.peer, &p.election} {
				var err error
				if *port, err = FreePort(); err != nil {
					return err
				}
			}
		}
		ps = append(ps, p)
		servers = append(servers, fmt.Sprintf("server.%d=%s:%d:%d", i, host(i-1), p.peer, p.election))
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
			// No fsync of the transaction log, as the PostgreSQL servers run
			// with fsync=off: on a loaded machine one fsync behind the
			// other servers' writes took seconds, and sessions expired
			// while their server waited on the disk. A killed server loses
			// nothing by it (what it wrote is in the page cache); only a
			// crash of the machine would.
			"forceSync=no",
		}
		cfg = append(cfg, fmt.Sprintf("maxSessionTimeout=%d", ZooKeeperMaxSession.Milliseconds()))
		z := &zkNode{Addr: fmt.Sprintf("%s:%d", host(i), p.client)}
		if certs == nil {
			cfg = append(cfg, fmt.Sprintf("clientPort=%d", p.client), "clientPortAddress="+host(i))
		} else {
			lines, clientTLS, err := zkTLS(certs, dir, p.client, host(i))
			if err != nil {
				return err
			}
			cfg, z.tls = append(cfg, lines...), clientTLS
		}
		cfg = append(cfg,
			"4lw.commands.whitelist=ruok,srvr,mntr,conf,cons",
			"admin.enableServer=false",
			"reconfigEnabled=false",
			"maxClientCnxns=0",
		)
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
		z.process = &process{
			Name: fmt.Sprintf("zk%d", i+1), Path: java, Dir: dir,
			Args: []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
				"-Dzookeeper.log.dir=" + dir,
				"-Dorg.slf4j.simpleLogger.showDateTime=true",
				"-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
				// Empty lock parents (container nodes) go within a second.
				"-Dznode.container.checkIntervalMs=500",
				"-Dznode.container.maxPerMinute=100000",
				"-cp", zkClasspath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", conf},
			Probe: z.serving,
		}
		if e.lab != nil {
			z.Path, z.Args = e.lab.wrap(i, z.Path, z.Args)
		}
		e.Nodes = append(e.Nodes, z)
	}
	return e.startAll(ctx)
}

// serving is the readiness probe: srvr answers with the server's mode
// (standalone, leader or follower) once it serves clients.
func (z *zkNode) serving(ctx context.Context) error {
	out, err := fourLetter(ctx, z.Addr, "srvr", z.tls)
	if err != nil {
		return err
	}
	if !strings.Contains(out, "Mode: ") {
		return fmt.Errorf("%s not serving: %q", z.Addr, out)
	}
	return nil
}

// ZooKeeperMode returns the mode of the ZooKeeper server at addr (a
// Node's Addr): standalone, leader or follower. A fault test finds an
// ensemble's leader with it.
func ZooKeeperMode(ctx context.Context, addr string) (string, error) {
	out, err := FourLetter(ctx, addr, "srvr")
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return m, nil
		}
	}
	return "", fmt.Errorf("%s: no mode in %q", addr, out)
}

// FourLetter sends one of ZooKeeper's four-letter commands (srvr, mntr,
// ruok, conf, cons: the ones the servers allow) to the server at addr and
// returns its answer.
func FourLetter(ctx context.Context, addr, cmd string) (string, error) {
	return fourLetter(ctx, addr, cmd, nil)
}

// fourLetter is FourLetter, over TLS with cfg unless it is nil (a TLS
// port answers the same commands once the handshake is done).
func fourLetter(ctx context.Context, addr, cmd string, cfg *tls.Config) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var (
		c   net.Conn
		err error
	)
	if cfg != nil {
		c, err = (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
	} else {
		c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
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
func (e *zkEnsemble) Addrs() string {
	var a []string
	for _, z := range e.Nodes {
		a = append(a, z.Addr)
	}
	return strings.Join(a, ",")
}
