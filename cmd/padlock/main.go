// Command padlock runs the padlock demo and tools.
//
//	padlock demo [--url URL] [--workers N] [--locks N] [--duration D]
//	padlock migrate [--url URL] [--print]
//	padlock run [--url URL] [--ttl D] [--wait D | --try] [--grace D] NAME -- CMD [ARGS...]
//	padlock holders [--url URL] [--json] [--watch D] [PREFIX]
//	padlock unlock --force [--yes] [--url URL] NAME
//	padlock serve [--url URL] [--listen ADDR] [--prefix P] [--allow-unlock]
//	padlock bench (--url URL[,URL...] | --local [--backends B,...]) [--workloads U1,U2,C1,C2] [--duration D] [--rounds N] [--out DIR] [--docs FILE]
//	padlock faults [--backends B,...] [--scenarios N,...] [--faults N] [--duration D] [--out DIR] [--docs FILE] [--all]
//	padlock etcd --name n1 --data-dir DIR --client URL --peer URL [--initial-cluster ...]
//	padlock version
//
// --url defaults to $PADLOCK_URL. `padlock demo` with neither starts an
// embedded etcd in a temporary directory, so it needs nothing installed.
//
// Exit codes: 0 success, 1 the command failed, 2 bad usage, 3 (unlock)
// nobody held the lock; run passes its child's status through, and uses 75
// (lock not acquired) and 76 (lock lost while the child ran).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
)

const usage = `usage: padlock <command> [flags]

commands:
  demo     contend for a few locks with fencing tokens and print a summary
  migrate  create the lock table of a postgres:// or mysql:// URL (or --print its DDL)
  run      hold a lock while a command runs (flock-style); its exit status is the command's
  holders  list the locks held under a prefix: token, owner, host, pid, age, lease, waiters
  unlock   --force: take a stuck lock away from its holder
  serve    a web console of the holders, with /metrics and /healthz
  bench    measure lock throughput and hand-off latency against the wire floor and the native clients
  faults   the fault suite: inject real faults into real servers and check what each backend kept
  etcd     run an embedded etcd v3.7 member, for development (padlocktest runs the same server)
  version  print padlock's version and the Go it was built with

--url defaults to $PADLOCK_URL.

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
	case "migrate":
		err = runMigrate(ctx, os.Args[2:], os.Stdout)
	case "run":
		err = runRun(ctx, os.Args[2:])
	case "holders":
		err = runHolders(ctx, os.Args[2:], os.Stdout)
	case "serve":
		err = runServe(ctx, os.Args[2:], os.Stdout)
	case "unlock":
		err = runUnlock(ctx, os.Args[2:], os.Stdin, os.Stdout)
	case "faults":
		err = runFaults(ctx, os.Args[2:], os.Stdout)
	case "bench":
		err = runBench(ctx, os.Args[2:], os.Stdout)
	case "version", "--version", "-version":
		printVersion()
		return
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "padlock: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if errors.Is(err, errHelp) {
		return
	}
	var ee exitError
	if errors.As(err, &ee) && ee.error == nil {
		os.Exit(ee.code) // a child's status, passed through
	}
	if err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "padlock") {
			msg = "padlock: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

// printVersion prints the module version and VCS revision the binary was
// built from, as the Go toolchain recorded them.
func printVersion() {
	version, rev, goVersion := "(devel)", "", runtime.Version()
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				rev = s.Value
			}
		}
	}
	fmt.Printf("padlock %s", version)
	if rev != "" {
		fmt.Printf(" (%.12s)", rev)
	}
	fmt.Printf(" %s\n", goVersion)
}
