package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/padlock-go/padlock/cmd/padlock/internal/etcdserver"
)

// runEtcd runs one embedded etcd member until ctx ends. It prints a ready
// line on stdout once the member serves clients.
func runEtcd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("etcd", flag.ExitOnError)
	var c etcdserver.Config
	fs.StringVar(&c.Name, "name", "n1", "member name")
	fs.StringVar(&c.Dir, "data-dir", "padlock-etcd.data", "data directory")
	fs.StringVar(&c.ClientURL, "client", "http://127.0.0.1:2379", "client URL to listen on")
	fs.StringVar(&c.PeerURL, "peer", "http://127.0.0.1:2380", "peer URL to listen on")
	fs.StringVar(&c.InitialCluster, "initial-cluster", "", "name=peerURL,... of every member (default: this one)")
	fs.StringVar(&c.LogLevel, "log-level", "error", "etcd log level")
	fs.StringVar(&c.CertFile, "cert-file", "", "server certificate for client TLS (with an https:// --client)")
	fs.StringVar(&c.KeyFile, "key-file", "", "key of --cert-file")
	fs.StringVar(&c.TrustedCAFile, "trusted-ca-file", "", "CA that client certificates must chain to (mutual TLS)")
	fs.UintVar(&c.AuthTokenTTL, "auth-token-ttl", 0, "lifetime of auth tokens in seconds (default etcd's, 300)")
	fs.UintVar(&c.BcryptCost, "bcrypt-cost", 0, "cost of password hashes (default etcd's, 10)")
	fs.Parse(args)
	e, err := etcdserver.Start(ctx, c)
	if err != nil {
		return err
	}
	defer e.Close()
	fmt.Println("padlock etcd ready", c.Name, c.ClientURL)
	select {
	case <-ctx.Done():
		return nil
	case err := <-e.Err():
		return err
	}
}
