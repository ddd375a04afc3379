package testserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// EtcdCluster is one or more etcd v3.7 members, each in its own process
// (`padlock etcd`), on loopback ports; or members of the etcd binary named
// by $PADLOCK_ETCD_BINARY (EtcdBinaryEnv), such as Debian's etcd 3.4.
//
// EtcdBinaryEnv is how benchmarks compare server versions:
//
//	PADLOCK_ETCD_BINARY=/usr/bin/etcd go test -run '^$' -bench . ./tests/etcd
type EtcdCluster struct {
	*Group[*EtcdMember]
}

// EtcdMember is one member process.
type EtcdMember struct {
	*Process
	ClientAddr string // host:port for clients
}

// EtcdBinaryEnv names an etcd server binary to run instead of the embedded
// v3.7 server.
const EtcdBinaryEnv = "PADLOCK_ETCD_BINARY"

// StartEtcd starts an n-member cluster in a new temporary directory.
func StartEtcd(ctx context.Context, n int) (*EtcdCluster, error) {
	return retryStart(ctx, func(ctx context.Context) (*EtcdCluster, error) { return startEtcd(ctx, n) })
}

func startEtcd(ctx context.Context, n int) (*EtcdCluster, error) {
	bin, external := os.Getenv(EtcdBinaryEnv), true
	if bin == "" {
		var err error
		if bin, err = PadlockBinary(); err != nil {
			return nil, err
		}
		external = false
	}
	g, err := newGroup[*EtcdMember]("padlock-etcd-")
	if err != nil {
		return nil, err
	}
	c := &EtcdCluster{g}
	if err := c.start(ctx, bin, external, n); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *EtcdCluster) start(ctx context.Context, bin string, external bool, n int) error {
	var initial []string
	type ports struct{ client, peer int }
	var ps []ports
	for i := 1; i <= n; i++ {
		cp, err := FreePort()
		if err != nil {
			return err
		}
		pp, err := FreePort()
		if err != nil {
			return err
		}
		ps = append(ps, ports{cp, pp})
		initial = append(initial, fmt.Sprintf("n%d=http://127.0.0.1:%d", i, pp))
	}
	for i, p := range ps {
		name := fmt.Sprintf("n%d", i+1)
		mdir := filepath.Join(c.Dir(), name)
		if err := os.MkdirAll(mdir, 0o755); err != nil {
			return err
		}
		client, peer := fmt.Sprintf("http://127.0.0.1:%d", p.client), fmt.Sprintf("http://127.0.0.1:%d", p.peer)
		proc := &Process{Name: "etcd-" + name, Path: bin, Dir: mdir, Ready: "padlock etcd ready",
			Args: []string{"etcd", "--name", name, "--data-dir", filepath.Join(mdir, "data"),
				"--client", client, "--peer", peer, "--initial-cluster", strings.Join(initial, ",")}}
		if external {
			// etcd's own flags, with the embedded server's compaction.
			proc.Ready = "ready to serve client requests"
			proc.Args = []string{"--name", name, "--data-dir", filepath.Join(mdir, "data"),
				"--listen-client-urls", client, "--advertise-client-urls", client,
				"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
				"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-token", "padlock",
				"--auto-compaction-mode", "revision", "--auto-compaction-retention", "100000"}
		}
		c.Nodes = append(c.Nodes, &EtcdMember{ClientAddr: fmt.Sprintf("127.0.0.1:%d", p.client), Process: proc})
	}
	return c.startAll(ctx)
}

// Endpoints returns the members' client addresses, comma-separated, as an
// etcd:// URL host wants them.
func (c *EtcdCluster) Endpoints() string {
	var eps []string
	for _, m := range c.Nodes {
		eps = append(eps, m.ClientAddr)
	}
	return strings.Join(eps, ",")
}
