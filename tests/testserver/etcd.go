package testserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// EtcdCluster is one or more etcd v3.7 members, each in its own process
// (`padlock etcd`), on loopback ports.
type EtcdCluster struct {
	*Group[*EtcdMember]
}

// EtcdMember is one member process.
type EtcdMember struct {
	*Process
	ClientAddr string // host:port for clients
}

// StartEtcd starts an n-member cluster in a new temporary directory.
func StartEtcd(ctx context.Context, n int) (*EtcdCluster, error) {
	return retryStart(ctx, func(ctx context.Context) (*EtcdCluster, error) { return startEtcd(ctx, n) })
}

func startEtcd(ctx context.Context, n int) (*EtcdCluster, error) {
	bin, err := PadlockBinary()
	if err != nil {
		return nil, err
	}
	g, err := newGroup[*EtcdMember]("padlock-etcd-")
	if err != nil {
		return nil, err
	}
	c := &EtcdCluster{g}
	if err := c.start(ctx, bin, n); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *EtcdCluster) start(ctx context.Context, bin string, n int) error {
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
		c.Nodes = append(c.Nodes, &EtcdMember{
			ClientAddr: fmt.Sprintf("127.0.0.1:%d", p.client),
			Process: &Process{
				Name: "etcd-" + name, Path: bin, Dir: mdir, Ready: "padlock etcd ready",
				Args: []string{"etcd", "--name", name, "--data-dir", filepath.Join(mdir, "data"),
					"--client", fmt.Sprintf("http://127.0.0.1:%d", p.client),
					"--peer", fmt.Sprintf("http://127.0.0.1:%d", p.peer),
					"--initial-cluster", strings.Join(initial, ",")},
			},
		})
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
