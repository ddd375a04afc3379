// Command padlock runs the padlock demo and tools.
//
//	padlock demo [--url URL] [--workers N] [--locks N] [--duration D]
//	padlock migrate [--url URL] [--print]
//	padlock run [--url URL] [--ttl D] [--wait D | --try] [--grace D] NAME -- CMD [ARGS...]
//	padlock elect [--url URL] [--ttl D] [--wait D] [--grace D] NAME VALUE [-- CMD [ARGS...]]
//	padlock elect --observe [--url URL] NAME
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
// Exit codes: 0 success (and after -h), 1 the command failed, 2 bad usage
// (a flag, flag value, argument or URL that is not valid), 3 (unlock)
// nobody held the lock; run passes its child's status through, and uses 75
// (lock not acquired) and 76 (lock lost while the child ran), as elect
// does (not elected within --wait; leadership lost). The URLs the
// commands print, usage included, are shown without their passwords.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// command is one of padlock's subcommands.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string) error
}

// commands are padlock's subcommands, in the order usage lists them.
var commands = []command{
	{"demo", "contend for a few locks with fencing tokens and print a summary", runDemo},
	{"migrate", "create the lock table of a postgres:// or mysql:// URL (or --print its DDL)",
		func(ctx context.Context, args []string) error { return runMigrate(ctx, args, os.Stdout) }},
	{"run", "hold a lock while a command runs (flock-style); its exit status is the command's", runRun},
	{"elect", "campaign for leader and hold it (or run a command while leader); --observe prints each leader",
		func(ctx context.Context, args []string) error { return runElect(ctx, args, os.Stdout) }},
	{"holders", "list the locks held under a prefix: token, owner, host, pid, age, lease, waiters",
		func(ctx context.Context, args []string) error { return runHolders(ctx, args, os.Stdout) }},
	{"unlock", "--force: take a stuck lock away from its holder",
		func(ctx context.Context, args []string) error { return runUnlock(ctx, args, os.Stdin, os.Stdout) }},
	{"serve", "a web console of the holders, with /metrics and /healthz",
		func(ctx context.Context, args []string) error { return runServe(ctx, args, os.Stdout) }},
	{"bench", "measure lock throughput and hand-off latency against the wire floor and the native clients",
		func(ctx context.Context, args []string) error { return runBench(ctx, args, os.Stdout) }},
	{"faults", "the fault suite: inject real faults into real servers and check what each backend kept",
		func(ctx context.Context, args []string) error { return runFaults(ctx, args, os.Stdout) }},
	{"etcd", "run an embedded etcd v3.7 member, for development (padlocktest runs the same server)", runEtcd},
	{"version", "print padlock's version and the Go it was built with",
		func(_ context.Context, args []string) error { return runVersion(args, os.Stdout) }},
}

func usage(w io.Writer) {
	fmt.Fprint(w, "usage: padlock <command> [flags]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\n--url defaults to $PADLOCK_URL.\n\nrun 'padlock <command> -h' for the flags of a command\n")
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// cli runs the subcommand args name and returns padlock's exit status.
func cli(ctx context.Context, args []string) int {
	if len(args) == 0 {
		usage(os.Stderr)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		usage(os.Stdout)
		return 0
	case "--version", "-version":
		args[0] = "version"
	}
	for _, c := range commands {
		if c.name == args[0] {
			return statusOf(c.run(ctx, args[1:]), os.Stderr)
		}
	}
	fmt.Fprintf(os.Stderr, "padlock: unknown command %q\n\n", args[0])
	usage(os.Stderr)
	return 2
}

// statusOf prints err, if any, and returns the status it means: 0 for
// none or after -h, 2 for a usage error, an exitError's own code, else 1.
func statusOf(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, errHelp) || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) && ee.error == nil {
		return ee.code // a child's status, passed through
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "padlock") {
		msg = "padlock: " + msg
	}
	fmt.Fprintln(stderr, msg)
	var ue usageError
	switch {
	case errors.As(err, &ue):
		return 2
	case errors.As(err, &ee):
		return ee.code
	}
	return 1
}
