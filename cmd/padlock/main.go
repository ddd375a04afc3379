// Command padlock runs the padlock demo and tools.
//
//	padlock demo [--url URL] [--workers N] [--locks N] [--duration D]
//	padlock etcd --name n1 --data-dir DIR --client URL --peer URL [--initial-cluster ...]
//
// `padlock demo` with no --url starts an embedded etcd in a temporary
// directory, so it needs nothing installed.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: padlock <command> [flags]

commands:
  demo    contend for a few locks with fencing tokens and print a summary
  etcd    run an embedded etcd v3.7 member (used by the test harness)

run 'padlock <command> -h' for the flags of a command
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "demo":
		err = runDemo(ctx, os.Args[2:])
	case "etcd":
		err = runEtcd(ctx, os.Args[2:])
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "padlock: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "padlock:", err)
		os.Exit(1)
	}
}
