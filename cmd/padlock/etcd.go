package main

import (
	"context"
	"os"

	"github.com/padlock-go/padlock/padlocktest/etcdserver"
)

// runEtcd runs one embedded etcd member until ctx ends. It prints a ready
// line on stdout once the member serves clients.
func runEtcd(ctx context.Context, args []string) error {
	return etcdserver.Run(ctx, args, os.Stdout)
}
