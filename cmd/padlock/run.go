//go:build unix

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/padlock-go/padlock"
)

// Exit statuses of padlock run besides the child's own.
const (
	exitNotAcquired = 75 // EX_TEMPFAIL: --try found it held, or --wait ran out
	exitLockLost    = 76 // the lock was lost while the child ran; the child was stopped
)

// runRun holds a lock for the life of a child process, in the manner of
// flock(1) and `consul lock`: the child runs with PADLOCK_NAME and
// PADLOCK_TOKEN in its environment, receives the signals padlock gets,
// and its exit status is padlock's. If the lock is lost (its Done closes)
// the child gets SIGTERM, then SIGKILL after --grace.
func runRun(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	url := urlFlag(fs, "backend `URL` (default $PADLOCK_URL)")
	ttl := fs.Duration("ttl", 0, "lease of the lock (default: the URL's ttl, else padlock's default)")
	wait := fs.Duration("wait", 0, "give up after waiting this long for the lock (default: wait for ever)")
	try := fs.Bool("try", false, "do not wait: give up at once if the lock is held")
	grace := fs.Duration("grace", 10*time.Second, "after the lock is lost, how long the child has between SIGTERM and SIGKILL")
	owner := fs.String("owner", "", "the owner recorded with the lock (shown by padlock holders)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: padlock run [--url URL] [--ttl D] [--wait D | --try] [--grace D] [--owner S] NAME -- CMD [ARGS...]

Takes the lock NAME, runs CMD in a process group of its own with
PADLOCK_NAME and PADLOCK_TOKEN (the fencing token) in its environment,
forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT to that group, and releases
the lock when CMD exits.

Exit status: the child's (128+N if signal N killed it); %d if the lock
was not acquired (--try, or --wait ran out); %d if the lock was lost while
the child ran (it got SIGTERM, then SIGKILL after --grace); 1 if padlock
failed; 2 for bad usage.

`, exitNotAcquired, exitLockLost)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) < 2 || (rest[1] == "--" && len(rest) < 3) {
		return usageError{errors.New("run needs a lock name and a command: padlock run NAME -- CMD [ARGS...]")}
	}
	name, command := rest[0], rest[1:]
	if command[0] == "--" {
		command = command[1:]
	}
	if *try && *wait > 0 {
		return usageError{errors.New("run takes --try or --wait, not both")}
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
	lctx := ctx
	if *owner != "" {
		lctx = padlock.WithOwner(ctx, *owner)
	}
	// Signals are ours from here on: one that comes before the command
	// starts means it never starts, and one that comes while padlock waits
	// for the lock ends the wait (Ctrl-Z stops padlock).
	sigs := notifySignals()
	defer signal.Stop(sigs)
	wctx, stopWait := context.WithCancel(lctx)
	defer stopWait()
	var interrupt syscall.Signal
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		interrupt = waitInterrupt(wctx, sigs)
		stopWait()
	}()
	var lk *padlock.Lock
	if *try {
		lk, err = l.TryLock(wctx, name, opts...)
	} else {
		lk, err = l.Lock(wctx, name, opts...)
	}
	stopWait()
	<-watching
	if interrupt == 0 && ctx.Err() != nil {
		// SIGINT or SIGTERM also end main's context: the signal is in
		// sigs, if the wait ended before the watcher read it.
		interrupt = waitInterrupt(ctx, sigs)
	}
	if interrupt != 0 {
		if lk != nil {
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			_ = lk.Unlock(uctx)
			cancel()
		}
		return exitError{128 + int(interrupt), fmt.Errorf("%v while waiting for the lock %q: the command was not run", interrupt, name)}
	}
	switch {
	case errors.Is(err, padlock.ErrNotAcquired), errors.Is(err, padlock.ErrTimeout):
		return exitError{exitNotAcquired, err}
	case err != nil:
		return asUsage(err) // an invalid NAME
	}
	env := []string{"PADLOCK_NAME=" + lk.Name(), "PADLOCK_TOKEN=" + strconv.FormatUint(lk.Token(), 10)}
	status, lost, err := supervise(lk.Done(), env, command, *grace, sigs)
	// The release gets its own bound: ctx may be done (a forwarded signal).
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	uerr := lk.Unlock(uctx)
	if errors.Is(uerr, padlock.ErrNotHeld) || errors.Is(uerr, padlock.ErrLost) {
		lost = true // the lease ran out before the command was done
	} else if uerr != nil && err == nil {
		fmt.Fprintf(os.Stderr, "padlock: releasing %q: %v (the lease ends it)\n", name, uerr)
	}
	switch {
	case err != nil:
		return err
	case lost && status == notStarted:
		return exitError{exitLockLost, fmt.Errorf("lost the lock %q before the command started (%v); the command was not run", name, lk.Err())}
	case lost:
		return exitError{exitLockLost, fmt.Errorf("lost the lock %q while the command ran (%v); the command was stopped", name, lk.Err())}
	}
	return exitError{code: status}
}

// holdOptions are the options of run's and elect's --ttl and --wait.
func holdOptions(ttl, wait time.Duration) []padlock.Option {
	var opts []padlock.Option
	if ttl != 0 {
		opts = append(opts, padlock.WithTTL(ttl))
	}
	if wait > 0 {
		opts = append(opts, padlock.WithWait(wait))
	}
	return opts
}

// waitInterrupt returns the first signal on sigs that interrupts (not
// SIGCONT; SIGTSTP stops padlock, as the terminal asked), or 0 once ctx
// ends with none pending.
func waitInterrupt(ctx context.Context, sigs <-chan os.Signal) syscall.Signal {
	for {
		select {
		case s := <-sigs:
			switch sig := s.(syscall.Signal); sig {
			case syscall.SIGCONT:
			case syscall.SIGTSTP:
				_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			default:
				return sig
			}
		case <-ctx.Done():
			select {
			case s := <-sigs:
				if sig := s.(syscall.Signal); sig != syscall.SIGCONT && sig != syscall.SIGTSTP {
					return sig
				}
			default:
			}
			return 0
		}
	}
}

// notifySignals takes the signals that run and elect forward to their
// command (or that end their wait) from here on.
func notifySignals() chan os.Signal {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGTSTP, syscall.SIGCONT)
	return sigs
}

// checkRunFlags refuses durations out of range before anything is
// opened: a bad flag value is a usage error (status 2), not a failure of
// the lock (status 1).
func checkRunFlags(fs *flag.FlagSet, ttl, wait, grace time.Duration) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	switch {
	case given["ttl"] && ttl < padlock.MinTTL:
		return usageError{fmt.Errorf("%w: --ttl %v is shorter than padlock's minimum %v", padlock.ErrInvalidOption, ttl, padlock.MinTTL)}
	case wait < 0:
		return usageError{fmt.Errorf("%w: --wait %v is negative", padlock.ErrInvalidOption, wait)}
	case grace < 0:
		return usageError{fmt.Errorf("%w: --grace %v is negative", padlock.ErrInvalidOption, grace)}
	}
	return nil
}

// supervise runs command, with env added to its environment, while a hold
// lasts and returns its exit status, or stops it when the hold's done
// closes (lost is then true). A hold already lost never starts the
// command: it returns notStarted, lost.
func supervise(done <-chan struct{}, env, command []string, grace time.Duration, sigs <-chan os.Signal) (status int, lost bool, err error) {
	// Every signal already there, not only the first: a SIGCONT or SIGTSTP
	// ahead of a SIGHUP must not let the command start and then get it.
	for pending := true; pending; {
		select {
		case s := <-sigs:
			if sig := s.(syscall.Signal); sig != syscall.SIGCONT && sig != syscall.SIGTSTP {
				return 128 + int(sig), false, nil // interrupted before the command started
			}
		default:
			pending = false
		}
	}
	if isDone(done) {
		// Lost between the grant and now (a grant that came with little
		// of its lease left, a pause, a forced release): the command
		// would run with nothing protecting it.
		return notStarted, true, nil
	}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), env...)
	// Its own process group, as timeout(1) does, so that stopping it stops
	// what it started too (a shell's children); and, where the system
	// allows, killed if padlock dies (whose lease would then lapse).
	cmd.SysProcAttr = childAttr()
	// The parent-death signal is tied to the thread that started the
	// child: keep it until the child is gone.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		return 0, false, fmt.Errorf("run %q: %w", command[0], err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	pgid := cmd.Process.Pid
	group := func(sig syscall.Signal) { _ = syscall.Kill(-pgid, sig) }
	var kill <-chan time.Time
	for {
		select {
		case werr := <-exited:
			if !lost && isDone(done) {
				lost = true // it was lost as the command ended
				group(syscall.SIGTERM)
				group(syscall.SIGCONT) // a stopped leftover must run to see it
				kill = time.After(grace)
			}
			if lost && kill != nil && !groupGone(pgid, kill) {
				// What the command started outlived it and the
				// grace: SIGKILL for the group.
				group(syscall.SIGKILL)
				kill = nil
			}
			if lost && kill == nil {
				// SIGKILL was sent: a bounded wait for the group to be
				// gone (a process in an uninterruptible wait dies only
				// when its I/O ends).
				groupGone(pgid, time.After(grace))
			}
			return exitStatus(cmd, werr), lost, nil
		case s := <-sigs:
			switch sig := s.(syscall.Signal); sig {
			case syscall.SIGTSTP:
				// Stopped from the terminal: stop the command too (its
				// group is not the terminal's), then ourselves.
				group(syscall.SIGSTOP)
				_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			default:
				group(sig)
			}
		case <-done:
			done, lost = nil, true
			group(syscall.SIGTERM)
			group(syscall.SIGCONT) // a stopped command must run to see it
			kill = time.After(grace)
		case <-kill:
			kill = nil
			group(syscall.SIGKILL)
		}
	}
}

// notStarted is supervise's status when the hold was lost before the
// command could start.
const notStarted = -1

// groupPoll is how often groupGone looks at the process group: the exit
// of what the command started sends no signal to padlock.
const groupPoll = 20 * time.Millisecond

// groupGone waits until no process of group pgid runs, and reports
// whether that came before deadline fired. A lost lock's SIGTERM usually
// ends the whole group at once, and padlock must not wait out the grace
// for a group that is already gone.
func groupGone(pgid int, deadline <-chan time.Time) bool {
	tick := time.NewTicker(groupPoll)
	defer tick.Stop()
	for groupRuns(pgid) {
		select {
		case <-deadline:
			return !groupRuns(pgid)
		case <-tick.C:
		}
	}
	return true
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// exitStatus is the shell's view of how the child ended.
func exitStatus(cmd *exec.Cmd, err error) int {
	if cmd.ProcessState == nil {
		if err != nil {
			return 1
		}
		return 0
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}
