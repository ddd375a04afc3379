package padlocktest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/padlock-go/padlock/padlocktest/etcdserver"
)

// etcdCluster is one or more etcd v3.7 members, each in its own process
// (padlock-etcd), on loopback ports; or members of the etcd binary named
// by $PADLOCK_ETCD_BINARY (EtcdBinaryEnv), such as Debian's etcd 3.4.
//
// EtcdBinaryEnv is how benchmarks compare server versions:
//
//	PADLOCK_ETCD_BINARY=/usr/bin/etcd go test -run '^$' -bench . ./bench/etcd
type etcdCluster struct {
	*group[*etcdMember]
	lab *netLab // with etcdOptions.Partitions: a host per member

	// How members are started, for members added later.
	bin      string
	prefix   []string
	external bool
	opts     etcdOptions
	added    int // members added so far
}

// Close kills the members, then removes their network lab, if any.
func (c *etcdCluster) Close() {
	c.group.Close()
	if c.lab != nil {
		c.lab.close()
	}
}

// etcdMember is one member process.
type etcdMember struct {
	*process
	ClientAddr string // host:port for clients
	peerURL    string
}

// EtcdBinaryEnv names an etcd server binary to run instead of the embedded
// v3.7 server.
const EtcdBinaryEnv = "PADLOCK_ETCD_BINARY"

// etcdOptions configure a cluster beyond its size.
type etcdOptions struct {
	// TLS, when set, makes the members serve clients over TLS only, with
	// its server certificate, and require client certificates signed by
	// its CA (mutual TLS).
	TLS *Certs
	// AuthTokenTTL is the lifetime of auth tokens in seconds (0: etcd's
	// 300). Authentication itself is enabled by the test, over the API;
	// with a TTL set, password hashes are cheap (bcrypt cost 4), so that
	// logins keep up on a loaded machine.
	AuthTokenTTL int
	// Partitions runs each member on a test host of its own (a network
	// namespace), so that the network between members can be cut.
	Partitions bool
}

// startEtcdN starts an n-member cluster in a new temporary directory.
func startEtcdN(ctx context.Context, n int) (*etcdCluster, error) {
	return startEtcdWith(ctx, n, etcdOptions{})
}

// startEtcdWith starts an n-member cluster configured by o.
func startEtcdWith(ctx context.Context, n int, o etcdOptions) (*etcdCluster, error) {
	return retryStart(ctx, func(ctx context.Context) (*etcdCluster, error) { return startEtcd(ctx, n, o) })
}

func startEtcd(ctx context.Context, n int, o etcdOptions) (*etcdCluster, error) {
	bin, external := os.Getenv(EtcdBinaryEnv), true
	var prefix []string
	if bin == "" {
		var err error
		if bin, prefix, err = embeddedEtcd(); err != nil {
			return nil, err
		}
		external = false
	}
	g, err := newGroup[*etcdMember]("padlock-etcd-")
	if err != nil {
		return nil, err
	}
	c := &etcdCluster{group: g}
	if o.Partitions {
		if c.lab, err = newNetLab(n); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.start(ctx, bin, prefix, external, n, o); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *etcdCluster) start(ctx context.Context, bin string, prefix []string, external bool, n int, o etcdOptions) error {
	c.bin, c.prefix, c.external, c.opts = bin, prefix, external, o
	var initial []string
	type ports struct{ client, peer int }
	var ps []ports
	host := func(i int) string { // member i's address (0-based)
		if c.lab != nil {
			return c.lab.hosts[i].ip
		}
		return "127.0.0.1"
	}
	for i := 1; i <= n; i++ {
		p := ports{2379, 2380} // a host of its own: etcd's own ports are free
		if c.lab == nil {
			var err error
			if p.client, err = FreePort(); err != nil {
				return err
			}
			if p.peer, err = FreePort(); err != nil {
				return err
			}
		}
		ps = append(ps, p)
		initial = append(initial, fmt.Sprintf("n%d=http://%s:%d", i, host(i-1), p.peer))
	}
	for i, p := range ps {
		m, err := c.member(i, fmt.Sprintf("n%d", i+1), host(i), p.client, p.peer, strings.Join(initial, ","), false)
		if err != nil {
			return err
		}
		c.Nodes = append(c.Nodes, m)
	}
	return c.startAll(ctx)
}

// member makes (without starting it) the process of member name, on host
// (lab host i, with a lab), serving clients and peers on the given ports;
// join: it joins the running cluster that initial describes.
func (c *etcdCluster) member(i int, name, host string, clientPort, peerPort int, initial string, join bool) (*etcdMember, error) {
	o := c.opts
	mdir := filepath.Join(c.Dir(), name)
	if err := os.MkdirAll(mdir, 0o755); err != nil {
		return nil, err
	}
	scheme := "http"
	if o.TLS != nil {
		scheme = "https"
	}
	client, peer := fmt.Sprintf("%s://%s:%d", scheme, host, clientPort), fmt.Sprintf("http://%s:%d", host, peerPort)
	state := "new"
	if join {
		state = "existing"
	}
	// Flags both servers know, with the same names.
	extra := []string{"--initial-cluster-state", state}
	if o.TLS != nil {
		extra = append(extra, "--cert-file", o.TLS.ServerCert, "--key-file", o.TLS.ServerKey, "--trusted-ca-file", o.TLS.CA)
	}
	if o.AuthTokenTTL > 0 {
		extra = append(extra, "--auth-token-ttl", fmt.Sprint(o.AuthTokenTTL), "--bcrypt-cost", "4")
	}
	proc := &process{Name: "etcd-" + name, Path: c.bin, Dir: mdir, Ready: etcdserver.ReadyLine,
		Args: append(append(slices.Clip(c.prefix), "--name", name, "--data-dir", filepath.Join(mdir, "data"),
			"--client", client, "--peer", peer, "--initial-cluster", initial), extra...)}
	if c.external {
		// etcd's own flags, with the embedded server's compaction.
		proc.Ready = "ready to serve client requests"
		proc.Args = []string{"--name", name, "--data-dir", filepath.Join(mdir, "data"),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", initial, "--initial-cluster-token", "padlock",
			"--auto-compaction-mode", "revision", "--auto-compaction-retention", "100000"}
		proc.Args = append(proc.Args, extra...)
		if o.TLS != nil {
			proc.Args = append(proc.Args, "--client-cert-auth")
		}
	}
	if c.lab != nil {
		proc.Path, proc.Args = c.lab.wrap(i, proc.Path, proc.Args)
	}
	return &etcdMember{ClientAddr: fmt.Sprintf("%s:%d", host, clientPort), peerURL: peer, process: proc}, nil
}

// Endpoints returns the members' client addresses, comma-separated, as an
// etcd:// URL host wants them.
func (c *etcdCluster) Endpoints() string {
	var eps []string
	for _, m := range c.Nodes {
		eps = append(eps, m.ClientAddr)
	}
	return strings.Join(eps, ",")
}
