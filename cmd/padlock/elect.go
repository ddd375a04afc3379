//go:build unix

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/padlock-go/padlock"
)

// runElect campaigns in an election and holds the leadership until
// interrupted (then resigns), or while a command runs (as padlock run
// does for a lock); with --observe it prints each change of leader, as
// `etcdctl elect -l` does.
func runElect(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("elect", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	url := urlFlag(fs, "backend `URL` (default $PADLOCK_URL)")
	observe := fs.Bool("observe", false, "print the leader, then each change, until interrupted")
	ttl := fs.Duration("ttl", 0, "lease of the leadership (default: the URL's ttl, else padlock's default)")
	wait := fs.Duration("wait", 0, "give up after campaigning this long (default: campaign for ever)")
	grace := fs.Duration("grace", 10*time.Second, "after the leadership is lost, how long the command has between SIGTERM and SIGKILL")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: padlock elect [--url URL] [--ttl D] [--wait D] [--grace D] NAME VALUE [-- CMD [ARGS...]]
       padlock elect --observe [--url URL] NAME

Campaigns in the election NAME with VALUE, prints a line when elected,
and holds the leadership until interrupted, then resigns. With CMD, runs
it while leader instead, as padlock run does for a lock: with
PADLOCK_NAME, PADLOCK_VALUE and PADLOCK_TOKEN (the term's fencing token)
in its environment, signals forwarded, and SIGTERM (then SIGKILL after
--grace) if the leadership is lost. With --observe, prints the leader
("TOKEN VALUE", or "no leader") and each change until interrupted.

Exit status: 0 after an interrupt, or CMD's own; %d if not elected within
--wait; %d if the leadership was lost; 1 if padlock failed; 2 for bad
usage.

`, exitNotAcquired, exitLockLost)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	rest := fs.Args()
	if *observe {
		if len(rest) != 1 {
			return usageError{errors.New("elect --observe needs an election name and nothing else")}
		}
		return observeElection(ctx, *url, rest[0], stdout)
	}
	if len(rest) < 2 {
		return usageError{errors.New("elect needs an election name and a value: padlock elect NAME VALUE [-- CMD ...]")}
	}
	name, value, command := rest[0], rest[1], rest[2:]
	if len(command) > 0 && command[0] == "--" {
		command = command[1:]
	}
	if len(rest) > 2 && len(command) == 0 {
		return usageError{errors.New("elect: nothing after --: padlock elect NAME VALUE -- CMD [ARGS...]")}
	}
	if err := checkRunFlags(fs, *ttl, *wait, *grace); err != nil {
		return err
	}
	opts := holdOptions(*ttl, *wait)
	l, err := openURL(ctx, *url)
	if err != nil {
		return err
	}
	defer l.Close()
	sigs := notifySignals()
	defer signal.Stop(sigs)

	// A signal while campaigning ends the campaign: nothing is left. One
	// that comes as the campaign succeeds ends the leadership at once.
	cctx, stopCampaign := context.WithCancel(ctx)
	defer stopCampaign()
	interrupted := make(chan struct{})
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		// SIGCONT is no interrupt, and Ctrl-Z stops padlock (waitInterrupt).
		if waitInterrupt(cctx, sigs) != 0 {
			close(interrupted)
			stopCampaign()
		}
	}()
	ld, err := l.Election(name).Campaign(cctx, value, opts...)
	stopCampaign()
	<-watching
	if !isDone(interrupted) && ctx.Err() != nil {
		// SIGINT and SIGTERM end main's context too: the watcher may have
		// seen that before the signal itself.
		close(interrupted)
	}
	switch {
	case errors.Is(err, padlock.ErrTimeout):
		return exitError{exitNotAcquired, err}
	case errors.Is(err, context.Canceled) && isDone(interrupted):
		return nil // interrupted while campaigning (SIGINT and SIGTERM end ctx too)
	case err != nil:
		return asUsage(err) // an invalid NAME or VALUE
	}
	fmt.Fprintf(stdout, "elected: %s %q token %d\n", name, value, ld.Token())

	var (
		status int
		lost   bool
	)
	if len(command) > 0 && !isDone(interrupted) {
		env := []string{"PADLOCK_NAME=" + name, "PADLOCK_VALUE=" + value, "PADLOCK_TOKEN=" + strconv.FormatUint(ld.Token(), 10)}
		status, lost, err = supervise(ld.Done(), env, command, *grace, sigs)
	} else if len(command) == 0 {
		// A leader with no command sits until interrupted (SIGCONT is
		// no interrupt, and Ctrl-Z stops padlock) or deposed.
		sctx, stopSitting := context.WithCancel(ctx)
		sat := make(chan struct{})
		go func() {
			defer close(sat)
			waitInterrupt(sctx, sigs)
			stopSitting()
		}()
		select {
		case <-interrupted:
		case <-sctx.Done():
		case <-ld.Done():
			lost = true
		}
		stopSitting()
		<-sat
	}
	// The resignation gets its own bound: ctx may be done.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	rerr := ld.Resign(rctx)
	if errors.Is(rerr, padlock.ErrNotHeld) {
		lost = true
	} else if rerr != nil && err == nil {
		fmt.Fprintf(os.Stderr, "padlock: resigning %q: %v (the lease ends it)\n", name, rerr)
	}
	switch {
	case err != nil:
		return err
	case lost:
		return exitError{exitLockLost, fmt.Errorf("lost the leadership of %q (%v)", name, ld.Err())}
	}
	fmt.Fprintf(stdout, "resigned: %s\n", name)
	return exitError{code: status}
}

// observeElection prints the leader of name, then each change, until ctx
// ends (an interrupt).
func observeElection(ctx context.Context, url, name string, stdout io.Writer) error {
	l, err := openURL(ctx, url)
	if err != nil {
		return err
	}
	defer l.Close()
	el := l.Election(name)
	if _, err := el.Leader(ctx); err != nil && !errors.Is(err, padlock.ErrNoLeader) {
		return asUsage(err) // an invalid NAME, or a backend without elections
	}
	for ld := range el.Observe(ctx) {
		if ld == (padlock.Leader{}) {
			fmt.Fprintln(stdout, "no leader")
			continue
		}
		fmt.Fprintf(stdout, "%d %s\n", ld.Token, ld.Value)
	}
	return nil
}
