// Command padlock-etcd runs one embedded etcd v3.7 member until it is sent
// SIGINT or SIGTERM. padlocktest builds and runs it, in a process of its own
// so that tests can kill, pause and restart it; it takes the flags of
// `padlock etcd`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/padlock-go/padlock/padlocktest/etcdserver"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := etcdserver.Run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "padlock-etcd:", err)
		os.Exit(1)
	}
}
