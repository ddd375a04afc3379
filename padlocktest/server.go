package padlocktest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// Kind is a kind of lock server, named as padlock's URL schemes name it.
type Kind string

// The kinds of server Start can run.
const (
	// Etcd is an etcd cluster: one member unless Nodes says more. The local
	// provider runs embedded etcd v3.7 (nothing to install), or the etcd
	// binary named by $PADLOCK_ETCD_BINARY.
	Etcd Kind = "etcd"
	// Redis is one Redis server without persistence.
	Redis Kind = "redis"
	// RedisCluster is a Redis Cluster of three masters (Nodes: more),
	// without replicas.
	RedisCluster Kind = "redis+cluster"
	// RedisSentinel is a Redis primary with one replica (Nodes: the data
	// nodes, two or more), without persistence, and a Redis Sentinel that
	// fails over to a replica a second after the primary falls silent. Its
	// URL names the Sentinel and the master (SentinelMaster).
	RedisSentinel Kind = "redis+sentinel"
	// RedLock is three independent Redis masters (Nodes: another number),
	// for padlock's redlock:// URLs.
	RedLock Kind = "redlock"
	// ZooKeeper is one ZooKeeper server, or an ensemble with Nodes(3).
	ZooKeeper Kind = "zookeeper"
	// Postgres is one PostgreSQL server with a database padlock, the role
	// padlock (password padlock) that owns it, and the superuser postgres
	// (password postgres).
	Postgres Kind = "postgres"
	// MySQL is one MariaDB server (MySQL's protocol) with a database
	// padlock, the user padlock (password padlock, all privileges on it)
	// and the user admin (password admin, all privileges).
	MySQL Kind = "mysql"
)

// Kinds lists every kind, in the order the docs give them.
var Kinds = []Kind{Etcd, Redis, RedisCluster, RedisSentinel, RedLock, ZooKeeper, Postgres, MySQL}

// Server is a running lock server of one kind: one or more nodes, each a
// process (or a container) that a test can kill, pause and restart, and
// the padlock URL that reaches them. Close stops it; Start's servers close
// when their test ends.
type Server struct {
	kind     Kind
	provider string
	nodes    []*Node
	// sentinels are a RedisSentinel server's Sentinels, not in nodes.
	sentinels []*Node
	// lab, with Partitions, holds the nodes' test hosts.
	lab *netLab
	// members, on etcd, adds and removes members.
	members  *etcdCluster
	urlFor   func(hosts string) string
	adminURL string
	adminDSN string
	// settle, if set, runs after Start: what a server needs beyond each
	// node's readiness (a Redis Cluster's state).
	settle func(ctx context.Context) error
	close  func()
	once   sync.Once
}

// Node is one server process (or container) of a Server.
type Node struct {
	// Addr is host:port where clients reach the node.
	Addr string
	ops  nodeOps
}

// nodeOps is what a provider does to one node.
type nodeOps interface {
	Start(ctx context.Context) error
	Stop() error
	Kill() error
	Pause() error
	Resume() error
	Restart(ctx context.Context) error
	Running() bool
}

// Start starts a server of the given kind for the test t and stops it
// when t ends. It skips t when no provider can run the kind (ErrMissing),
// unless RequireServers says a missing server is a failure, and fails t on
// any other error. Starting may take a while (PostgreSQL's initdb, a JVM):
// a package whose tests share a server starts it once, with New, in its
// TestMain (see Main).
func Start(t testing.TB, kind Kind, opts ...Option) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := New(ctx, kind, opts...)
	if errors.Is(err, ErrMissing) && !RequireServers() {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// New starts a server of the given kind, with the provider that
// PADLOCK_SERVERS (or the Provider option) chooses. The caller must Close it.
func New(ctx context.Context, kind Kind, opts ...Option) (*Server, error) {
	c := config{}
	for _, o := range opts {
		o(&c)
	}
	if err := c.check(kind); err != nil {
		return nil, err
	}
	p, err := chooseProvider(ctx, kind, c)
	if err != nil {
		return nil, err
	}
	var s *Server
	switch p {
	case ProviderLocal:
		s, err = startLocal(ctx, kind, c)
	case ProviderContainers:
		s, err = startContainers(ctx, kind, c)
	}
	if err != nil {
		return nil, fmt.Errorf("padlocktest: %s (%s): %w", kind, p, err)
	}
	s.kind, s.provider = kind, p
	return s, nil
}

// Kind is the server's kind.
func (s *Server) Kind() Kind { return s.kind }

// Provider is the provider that runs the server: ProviderLocal or
// ProviderContainers.
func (s *Server) Provider() string { return s.provider }

// Nodes are the server's nodes: etcd members, Redis masters, ZooKeeper
// servers, or the one database server.
func (s *Server) Nodes() []*Node { return s.nodes }

// Addrs are the nodes' addresses, comma-separated, as padlock URLs name
// several hosts.
func (s *Server) Addrs() string {
	var a []string
	for _, n := range s.nodes {
		a = append(a, n.Addr)
	}
	return strings.Join(a, ",")
}

// URL is padlock's URL for the server, with no key prefix or path: for
// example etcd://127.0.0.1:2379, redlock://h1,h2,h3 or
// postgres://padlock:padlock@127.0.0.1:5432/padlock?sslmode=disable.
// With the TLS option it carries the CA and the client certificate.
func (s *Server) URL() string { return s.urlFor(s.Addrs()) }

// URLVia is the server's URL through p, a proxy in front of every node
// (see Proxy).
func (s *Server) URLVia(p *Proxy) string { return s.urlFor(p.Addr()) }

// AdminURL is the padlock URL of a user that may create tables (the SQL
// kinds' admin user, for padlock's Migrate); for the other kinds, URL.
func (s *Server) AdminURL() string {
	if s.adminURL == "" {
		return s.URL()
	}
	return s.adminURL
}

// AdminDSN is what the SQL kinds' drivers take to connect as the
// administrator, for a test's own look behind padlock's back: a pgx
// connection URL as the superuser, or a go-sql-driver/mysql DSN as the
// user admin. It is "" for the other kinds.
func (s *Server) AdminDSN() string { return s.adminDSN }

// Proxy starts a proxy in front of every node, for one client, and closes
// it when t ends: open a Locker on URLVia(proxy) and Cut, Blackhole or
// DropAnswers its path alone. A Redis Cluster or Sentinel cannot be proxied
// (clients follow the addresses the servers announce); Proxy fails t then.
func (s *Server) Proxy(t testing.TB) *Proxy {
	t.Helper()
	if s.kind == RedisCluster || s.kind == RedisSentinel {
		t.Fatalf("padlocktest: a %s server cannot be proxied (its clients follow the addresses the nodes announce): %v", s.kind, ErrUnsupported)
	}
	var up []string
	for _, n := range s.nodes {
		up = append(up, n.Addr)
	}
	p, err := NewProxy(up...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// each runs f on every node and joins the errors.
func (s *Server) each(f func(n *Node) error) error {
	var errs []error
	for _, n := range s.nodes {
		if err := f(n); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Kill kills every node (see Node.Kill).
func (s *Server) Kill() error { return s.each((*Node).Kill) }

// Pause pauses every node (see Node.Pause).
func (s *Server) Pause() error { return s.each((*Node).Pause) }

// Resume resumes every node.
func (s *Server) Resume() error { return s.each((*Node).Resume) }

// Restart kills every node, then starts them all again (see Start).
func (s *Server) Restart(ctx context.Context) error {
	if err := s.Kill(); err != nil {
		return err
	}
	return s.Start(ctx)
}

// Start starts every node that is not running, together (a cluster's
// members need each other to become ready), and waits until the server
// serves clients (for a Redis Cluster, until every node reports
// cluster_state:ok) or ctx ends.
func (s *Server) Start(ctx context.Context) error {
	errs := make(chan error, len(s.nodes))
	for _, n := range s.nodes {
		go func() {
			if n.Running() {
				errs <- nil
				return
			}
			errs <- n.Start(ctx)
		}()
	}
	var all []error
	for range s.nodes {
		if err := <-errs; err != nil {
			all = append(all, err)
		}
	}
	if len(all) == 0 && s.settle != nil {
		return s.settle(ctx)
	}
	return errors.Join(all...)
}

// Close kills the server and removes everything it made (data
// directories, containers). It may be called more than once.
func (s *Server) Close() { s.once.Do(s.close) }

// Start starts a killed or stopped node again, on the same address and
// data, and waits until it serves clients or ctx ends.
func (n *Node) Start(ctx context.Context) error { return n.ops.Start(ctx) }

// Stop asks the node to shut down cleanly, and kills it if it has not
// within ten seconds.
func (n *Node) Stop() error { return n.ops.Stop() }

// Kill kills the node at once (SIGKILL), as a crash would; its data
// survives for Start.
func (n *Node) Kill() error { return n.ops.Kill() }

// Pause freezes the node (SIGSTOP, or a container's freezer): it keeps
// its connections but answers nothing, like a long GC pause or a frozen VM.
func (n *Node) Pause() error { return n.ops.Pause() }

// Resume continues a paused node.
func (n *Node) Resume() error { return n.ops.Resume() }

// Restart kills the node and starts it again.
func (n *Node) Restart(ctx context.Context) error { return n.ops.Restart(ctx) }

// Running reports whether the node is started and has not exited.
func (n *Node) Running() bool { return n.ops.Running() }

// LogTail returns the end of the node's own log (its process's output),
// for a test's error message; "" where the provider keeps none.
func (n *Node) LogTail() string {
	if t, ok := n.ops.(interface{ tail() string }); ok {
		return t.tail()
	}
	return ""
}

// Partition cuts the network between sides of the server's nodes, on a
// server started with Partitions: nothing a node of one side sends to a
// node of another arrives (a route to nowhere: a send fails at once, and
// open connections go silent). Nodes in no side keep all their links, and
// the test reaches every node throughout. heal restores every link this
// server's partitions cut.
func (s *Server) Partition(sides ...[]*Node) (heal func() error, err error) {
	if s.lab == nil {
		return nil, fmt.Errorf("%w: Partition on a server started without Partitions", ErrUnsupported)
	}
	index := map[*Node]int{}
	for i, n := range s.nodes {
		index[n] = i
	}
	var idx [][]int
	for _, side := range sides {
		var is []int
		for _, n := range side {
			i, ok := index[n]
			if !ok {
				return nil, fmt.Errorf("%w: Partition: a node of another server", ErrInvalid)
			}
			is = append(is, i)
		}
		idx = append(idx, is)
	}
	for a := range idx {
		for b := a + 1; b < len(idx); b++ {
			if err := s.lab.cut(idx[a], idx[b]); err != nil {
				s.lab.heal()
				return nil, err
			}
		}
	}
	return s.lab.heal, nil
}
