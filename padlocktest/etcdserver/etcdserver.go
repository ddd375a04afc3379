// Package etcdserver runs an embedded etcd v3.7 server: in-process for the
// demo, and in a process of its own as `padlock etcd` and as padlocktest's
// etcd (cmd/padlock-etcd), so that the client and server versions always
// match.
package etcdserver

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Config names one member of a cluster.
type Config struct {
	Name           string // member name, e.g. "n1"
	Dir            string // data directory
	ClientURL      string // e.g. http://127.0.0.1:2379
	PeerURL        string // e.g. http://127.0.0.1:2380
	InitialCluster string // "n1=http://...,n2=http://..."; empty for one member
	// JoinExisting makes the member join a running cluster (which has
	// added it with MemberAdd) instead of starting a new one.
	JoinExisting bool
	LogLevel     string // zap level; empty means "error"

	// Client TLS (ClientURL https://): the server's certificate and key,
	// and, for mutual TLS, the CA that client certificates must chain to.
	CertFile, KeyFile, TrustedCAFile string
	// AuthTokenTTL is the lifetime of etcd's simple auth tokens in seconds
	// (0: etcd's default, 300); a short one tests token renewal.
	AuthTokenTTL uint
	// BcryptCost is the cost of the password hashes (0: etcd's, 10); a
	// low one makes logins cheap in tests.
	BcryptCost uint
}

// Server is a running member.
type Server struct {
	*embed.Etcd
	level zap.AtomicLevel
}

// Close stops the member. etcd logs every listener it closes as an error
// ("setting up serving from embedded etcd failed"), with a stack trace: a
// normal shutdown is silenced first, so only real errors are ever logged.
func (s *Server) Close() {
	s.level.SetLevel(zap.FatalLevel)
	s.Etcd.Close()
}

// Start starts the member and waits until it serves clients (for a cluster,
// until a leader is elected), or ctx ends.
func Start(ctx context.Context, c Config) (*Server, error) {
	cu, err := url.Parse(c.ClientURL)
	if err != nil {
		return nil, fmt.Errorf("client url: %w", err)
	}
	pu, err := url.Parse(c.PeerURL)
	if err != nil {
		return nil, fmt.Errorf("peer url: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Name = c.Name
	cfg.Dir = c.Dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = c.InitialCluster
	if cfg.InitialCluster == "" {
		cfg.InitialCluster = c.Name + "=" + c.PeerURL
	}
	cfg.InitialClusterToken = "padlock"
	if c.JoinExisting {
		cfg.ClusterState = embed.ClusterStateFlagExisting
	}
	if c.CertFile != "" {
		cfg.ClientTLSInfo.CertFile, cfg.ClientTLSInfo.KeyFile = c.CertFile, c.KeyFile
		cfg.ClientTLSInfo.TrustedCAFile = c.TrustedCAFile
		cfg.ClientTLSInfo.ClientCertAuth = c.TrustedCAFile != ""
	}
	if c.AuthTokenTTL > 0 {
		cfg.AuthTokenTTL = c.AuthTokenTTL
	}
	if c.BcryptCost > 0 {
		cfg.BcryptCost = c.BcryptCost
	}
	if c.LogLevel == "" {
		c.LogLevel = "error"
	}
	level, err := zap.ParseAtomicLevel(c.LogLevel)
	if err != nil {
		return nil, fmt.Errorf("log level: %w", err)
	}
	zcfg := zap.NewProductionConfig()
	zcfg.Level = level
	zcfg.Sampling = nil
	lg, err := zcfg.Build()
	if err != nil {
		return nil, err
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	// Keep the last 100,000 revisions so that watches rarely see
	// compaction; the watch code handles it anyway.
	cfg.AutoCompactionMode = embed.CompactorModeRevision
	cfg.AutoCompactionRetention = "100000"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	srv := &Server{Etcd: e, level: level}
	select {
	case <-e.Server.ReadyNotify():
		return srv, nil
	case err := <-e.Err():
		srv.Close()
		return nil, err
	case <-ctx.Done():
		e.Server.Stop()
		srv.Close()
		return nil, ctx.Err()
	case <-time.After(time.Minute):
		e.Server.Stop()
		srv.Close()
		return nil, fmt.Errorf("etcd member %s not ready after a minute", c.Name)
	}
}
