package etcdserver

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
)

// ReadyLine starts the line Run prints once the member serves clients.
const ReadyLine = "padlock etcd ready"

// ErrUsage is returned by Run for flags or arguments it cannot take (a
// command line mistake, which `padlock etcd` exits 2 for). For -h it is
// joined with flag.ErrHelp.
var ErrUsage = errors.New("etcd: bad usage")

// Run runs one member configured by command-line flags (args, without the
// program name) until ctx ends. It prints ReadyLine, the member's name and
// client URL on out once the member serves clients. `padlock etcd` and
// padlocktest's etcd server are this function.
func Run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	var c Config
	fs.StringVar(&c.Name, "name", "n1", "member name")
	fs.StringVar(&c.Dir, "data-dir", "padlock-etcd.data", "data directory")
	fs.StringVar(&c.ClientURL, "client", "http://127.0.0.1:2379", "client URL to listen on")
	fs.StringVar(&c.PeerURL, "peer", "http://127.0.0.1:2380", "peer URL to listen on")
	fs.StringVar(&c.InitialCluster, "initial-cluster", "", "name=peerURL,... of every member (default: this one)")
	state := fs.String("initial-cluster-state", "new", "new: start a cluster; existing: join a running one, which has added this member")
	fs.StringVar(&c.LogLevel, "log-level", "error", "etcd log level")
	fs.StringVar(&c.CertFile, "cert-file", "", "server certificate for client TLS (with an https:// --client)")
	fs.StringVar(&c.KeyFile, "key-file", "", "key of --cert-file")
	fs.StringVar(&c.TrustedCAFile, "trusted-ca-file", "", "CA that client certificates must chain to (mutual TLS)")
	fs.UintVar(&c.AuthTokenTTL, "auth-token-ttl", 0, "lifetime of auth tokens in seconds (default etcd's, 300)")
	fs.UintVar(&c.BcryptCost, "bcrypt-cost", 0, "cost of password hashes (default etcd's, 10)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err) // flag.ErrHelp still matches
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", ErrUsage, fs.Args())
	}
	switch *state {
	case "new":
	case "existing":
		c.JoinExisting = true
	default:
		return fmt.Errorf("%w: --initial-cluster-state %q: want new or existing", ErrUsage, *state)
	}
	e, err := Start(ctx, c)
	if err != nil {
		return err
	}
	defer e.Close()
	fmt.Fprintln(out, ReadyLine, c.Name, c.ClientURL)
	select {
	case <-ctx.Done():
		return nil
	case err := <-e.Err():
		return err
	}
}
