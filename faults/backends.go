package faults

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/padlock-go/padlock/padlocktest"
)

// Backend is one configuration under test: a server kind and the URL
// options padlock is given.
type Backend struct {
	Name  string
	Kind  padlocktest.Kind
	Nodes int    // 0: the kind's default
	Query string // URL options, such as fair=true or mode=advisory
	// TTL is each hold's TTL: the backend's minimum or close to it, so
	// that faults outlast it quickly.
	TTL time.Duration
	// Only, if set, lists the only scenarios that run on this backend (the
	// others are n/a): a topology that exists for one fault.
	Only []int
	// Partitions runs each node on a test host of its own, so that the
	// network between nodes can be cut (padlocktest.Partitions).
	Partitions bool
}

// Backends are every configuration the suite covers.
var Backends = []Backend{
	{Name: "etcd", Kind: padlocktest.Etcd, TTL: 2 * time.Second},
	{Name: "redis", Kind: padlocktest.Redis, TTL: time.Second},
	{Name: "redis-fair", Kind: padlocktest.Redis, Query: "fair=true", TTL: time.Second},
	{Name: "redis-cluster", Kind: padlocktest.RedisCluster, TTL: time.Second},
	{Name: "redlock", Kind: padlocktest.RedLock, TTL: time.Second},
	// A primary and a replica behind Sentinel, for the failover scenario:
	// the TTL outlasts a failover (a second of silence, then the
	// promotion), or every lease would lapse before anyone could regrant.
	{Name: "redis-sentinel", Kind: padlocktest.RedisSentinel, TTL: 5 * time.Second, Only: []int{7}},
	{Name: "redis-sentinel-wait", Kind: padlocktest.RedisSentinel, Query: "wait_replicas=1", TTL: 5 * time.Second, Only: []int{7}},
	{Name: "zookeeper", Kind: padlocktest.ZooKeeper, TTL: time.Second},
	// Three etcd members and three ZooKeeper servers, each on a test host
	// of its own (a network namespace), for the faults of one member: its
	// restart (6), its partition (8) and its pause (14), each the leader's.
	{Name: "etcd-3", Kind: padlocktest.Etcd, Nodes: 3, Partitions: true, TTL: 2 * time.Second, Only: []int{6, 8, 14}},
	{Name: "zookeeper-3", Kind: padlocktest.ZooKeeper, Nodes: 3, Partitions: true, TTL: 2 * time.Second, Only: []int{6, 8, 14}},
	// Three etcd members on loopback, for the membership scenario.
	{Name: "etcd-members", Kind: padlocktest.Etcd, Nodes: 3, TTL: 2 * time.Second, Only: []int{15}},
	{Name: "postgres", Kind: padlocktest.Postgres, TTL: time.Second},
	{Name: "postgres-advisory", Kind: padlocktest.Postgres, Query: "mode=advisory", TTL: time.Second},
	{Name: "mysql", Kind: padlocktest.MySQL, TTL: time.Second},
	{Name: "mysql-advisory", Kind: padlocktest.MySQL, Query: "mode=advisory", TTL: time.Second},
}

// BackendNamed returns the backend called name.
func BackendNamed(name string) (Backend, error) {
	var names []string
	for _, b := range Backends {
		if b.Name == name {
			return b, nil
		}
		names = append(names, b.Name)
	}
	return Backend{}, fmt.Errorf("%w: backend %q (want one of %s)", ErrInvalid, name, strings.Join(names, ", "))
}

// proxied reports whether each client can have a proxy of its own: not on
// a Redis Cluster or behind Sentinel, whose clients follow the addresses
// the servers announce.
func (b Backend) proxied() bool {
	return b.Kind != padlocktest.RedisCluster && b.Kind != padlocktest.RedisSentinel
}

// ensemble reports whether the backend is a consensus cluster of several
// servers (etcd members, a ZooKeeper ensemble), whose faults hit its
// leader alone.
func (b Backend) ensemble() bool {
	return b.Nodes > 1 && (b.Kind == padlocktest.Etcd || b.Kind == padlocktest.ZooKeeper)
}

// queues reports whether waiters have a place in a queue on the server
// (etcd, ZooKeeper, fair Redis), to which the lock is handed in turn.
func (b Backend) queues() bool {
	return b.Kind == padlocktest.Etcd || b.Kind == padlocktest.ZooKeeper || strings.Contains(b.Query, "fair=true")
}

// queuesWriters reports whether the backend's writers wait in a queue on
// the server, in the order they came: where it queues waiters (queues),
// and on MySQL/MariaDB, whose writers queue in both modes although its
// readers, permits and candidacies do not (so it is not FairFIFO).
func (b Backend) queuesWriters() bool { return b.queues() || b.Kind == padlocktest.MySQL }

// url is padlock's URL for this backend from base (a padlocktest server
// URL, perhaps through a proxy), in a namespace of the run's own: a key
// prefix, a ZooKeeper root or a table.
func (b Backend) url(base, ns string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	q := u.Query()
	extra, err := url.ParseQuery(b.Query)
	if err != nil {
		return "", err
	}
	for k, v := range extra {
		q[k] = v
	}
	switch b.Kind {
	case padlocktest.Etcd, padlocktest.ZooKeeper:
		u.Path = "/" + ns
	case padlocktest.Postgres, padlocktest.MySQL:
		q.Set("table", strings.ReplaceAll(ns, "-", "_"))
	default:
		q.Set("prefix", ns)
		if u.Path == "" {
			u.Path = "/"
		}
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}
