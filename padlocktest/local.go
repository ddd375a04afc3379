package padlocktest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
)

// localMissing says why the local provider cannot run kind here (nil: it
// can).
func localMissing(kind Kind) error {
	var err error
	switch kind {
	case Etcd:
		if bin := os.Getenv(EtcdBinaryEnv); bin != "" {
			if _, err := exec.LookPath(bin); err != nil {
				return fmt.Errorf("%w: %s=%s: %v", ErrMissing, EtcdBinaryEnv, bin, err)
			}
			return nil
		}
		if _, err := exec.LookPath("go"); err != nil {
			return fmt.Errorf("%w: the go command, which builds the embedded etcd server", ErrMissing)
		}
	case Redis, RedLock, RedisCluster, RedisSentinel:
		_, err = redisBin()
	case ZooKeeper:
		_, err = zkJava()
	case Postgres:
		_, err = postgresBin()
	case MySQL:
		_, _, err = mariaBins()
	}
	return err
}

// startLocal starts kind from this machine's binaries.
func startLocal(ctx context.Context, kind Kind, c config) (*Server, error) {
	switch kind {
	case Etcd:
		e, err := startEtcdWith(ctx, c.nodes, etcdOptions{TLS: c.tls, AuthTokenTTL: c.etcdTokenTTL, Partitions: c.partitions})
		if err != nil {
			return nil, err
		}
		s := &Server{close: e.Close, urlFor: hostsURL("etcd", "etcds", c.tls), lab: e.lab, members: e}
		for _, m := range e.Nodes {
			s.nodes = append(s.nodes, &Node{Addr: m.ClientAddr, ops: m})
		}
		return s, nil
	case Redis, RedLock, RedisCluster:
		var (
			g   *redisGroup
			err error
		)
		switch {
		case kind == RedisCluster:
			g, err = startRedisClusterN(ctx, c.nodes, redisOpts{fake: c.fakeClock, aof: c.redisAOF, keyspace: c.keyspace})
		case c.tls != nil || len(c.redisUsers) > 0:
			g, err = startRedisUsers(ctx, c.tls, c.redisUsers...)
		default:
			g, err = startRedisN(ctx, c.nodes, redisOpts{fake: c.fakeClock, aof: c.redisAOF, keyspace: c.keyspace})
		}
		if err != nil {
			return nil, err
		}
		s := &Server{close: g.Close, urlFor: hostsURL(string(kind), "rediss", c.tls)}
		if kind == RedisCluster {
			s.settle = g.clusterOK
		}
		for _, r := range g.Nodes {
			s.nodes = append(s.nodes, &Node{Addr: r.Addr, ops: r})
		}
		return s, nil
	case RedisSentinel:
		g, err := startSentinelN(ctx, c.nodes, c.fakeClock, c.keyspace)
		if err != nil {
			return nil, err
		}
		sentinel := g.sentinel.Nodes[0]
		s := &Server{close: g.Close, settle: g.settle, urlFor: func(string) string {
			return "redis+sentinel://" + sentinel.Addr + "/" + SentinelMaster
		}}
		for _, r := range g.data.Nodes {
			s.nodes = append(s.nodes, &Node{Addr: r.Addr, ops: r})
		}
		s.sentinels = []*Node{{Addr: sentinel.Addr, ops: sentinel}}
		return s, nil
	case ZooKeeper:
		e, err := startZooKeeperN(ctx, c.nodes, c.partitions, c.tls)
		if err != nil {
			return nil, err
		}
		s := &Server{close: e.Close, urlFor: hostsURL("zk", "zks", c.tls), lab: e.lab}
		for _, z := range e.Nodes {
			s.nodes = append(s.nodes, &Node{Addr: z.Addr, ops: z})
		}
		return s, nil
	case Postgres:
		pg, err := startPostgresWith(ctx, pgOptions{TLS: c.tls})
		if err != nil {
			return nil, err
		}
		return &Server{close: pg.Close, urlFor: pg.url, adminURL: pg.AdminURL(), adminDSN: pg.AdminURL(),
			nodes: []*Node{{Addr: pg.Addr, ops: pg}}}, nil
	case MySQL:
		m, err := startMariaDBWith(ctx, mariaOptions{TLS: c.tls})
		if err != nil {
			return nil, err
		}
		return &Server{close: m.Close, urlFor: m.url, adminURL: m.AdminURL(), adminDSN: m.AdminDSN(),
			nodes: []*Node{{Addr: m.Addr, ops: m}}}, nil
	}
	return nil, fmt.Errorf("%w: kind %q", ErrInvalid, kind)
}

// hostsURL makes the URL function of a kind whose URLs are
// scheme://hosts: with certs, tlsScheme://hosts/ and padlock's TLS
// parameters (the CA, and the client certificate and key).
func hostsURL(scheme, tlsScheme string, certs *Certs) func(hosts string) string {
	return func(hosts string) string {
		if certs == nil {
			return scheme + "://" + hosts
		}
		q := url.Values{"ca": {certs.CA}, "cert": {certs.ClientCert}, "key": {certs.ClientKey}}
		return tlsScheme + "://" + hosts + "/?" + q.Encode()
	}
}
