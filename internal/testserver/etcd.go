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
	Members []*EtcdMember
	dir     string
}

// EtcdMember is one member process.
type EtcdMember struct {
	*Process
	ClientAddr string // host:port for clients
}

// StartEtcd starts an n-member cluster in a new temporary directory.
func StartEtcd(ctx context.Context, n int) (*EtcdCluster, error) {
	bin, err := PadlockBinary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "padlock-etcd-")
	if err != nil {
		return nil, err
	}
	c := &EtcdCluster{dir: dir}
	var initial []string
	type ports struct{ client, peer int }
	var ps []ports
	for i := 1; i <= n; i++ {
		cp, err := FreePort()
		if err != nil {
			return nil, err
		}
		pp, err := FreePort()
		if err != nil {
			return nil, err
		}
		ps = append(ps, ports{cp, pp})
		initial = append(initial, fmt.Sprintf("n%d=http://127.0.0.1:%d", i, pp))
	}
	for i, p := range ps {
		name := fmt.Sprintf("n%d", i+1)
		mdir := filepath.Join(dir, name)
		if err := os.MkdirAll(mdir, 0o755); err != nil {
			return nil, err
		}
		c.Members = append(c.Members, &EtcdMember{
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
	// Members of a new cluster become ready together, so start them at once.
	errs := make(chan error, n)
	for _, m := range c.Members {
		go func() { errs <- m.Start(ctx) }()
	}
	var firstErr error
	for range c.Members {
		if err := <-errs; err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		c.Close()
		return nil, firstErr
	}
	return c, nil
}

// Endpoints returns the members' client addresses, comma-separated, as an
// etcd:// URL host wants them.
func (c *EtcdCluster) Endpoints() string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.ClientAddr)
	}
	return strings.Join(eps, ",")
}

// Close kills every member and removes the data.
func (c *EtcdCluster) Close() {
	for _, m := range c.Members {
		m.Kill()
	}
	os.RemoveAll(c.dir)
}
