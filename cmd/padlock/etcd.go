package main

import (
	"context"
	"errors"
	"flag"
	"os"

	"github.com/padlock-go/padlock/padlocktest/etcdserver"
)

// runEtcd runs one embedded etcd member until ctx ends. It prints a ready
// line on stdout once the member serves clients.
func runEtcd(ctx context.Context, args []string) error {
	err := etcdserver.Run(ctx, args, os.Stdout)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return errHelp
	case errors.Is(err, etcdserver.ErrUsage):
		return usageError{err}
	}
	return err
}
