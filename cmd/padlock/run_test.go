//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/padlock-go/padlock/conformance"
)

// startEtcd starts the embedded etcd for a test and returns its URL.
func startEtcd(t *testing.T, ctx context.Context) string {
	t.Helper()
	addr, stop, err := embeddedEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return "etcd://" + addr + "/run"
}

func status(err error) int {
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if err != nil {
		return -1
	}
	return 0
}

// Concurrent `padlock run`s of one name never overlap (the child fails
// with status 9 if it finds another inside), each child sees its token,
// and the tokens rise in the order the children ran.
func TestRunExclusive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := startEtcd(t, ctx)
	dir := t.TempDir()
	script := `mkdir "$DIR/inside" || exit 9; echo "$PADLOCK_NAME $PADLOCK_TOKEN" >> "$DIR/tokens"; sleep 0.05; rmdir "$DIR/inside"`
	t.Setenv("DIR", dir)
	const runners, rounds = 3, 4
	var wg sync.WaitGroup
	for range runners {
		wg.Go(func() {
			for range rounds {
				if err := runRun(ctx, []string{"--url", url, "shared", "--", "sh", "-c", script}); status(err) != 0 {
					t.Errorf("run = %v (status %d)", err, status(err))
					return
				}
			}
		})
	}
	wg.Wait()
	data, err := os.ReadFile(filepath.Join(dir, "tokens"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != runners*rounds {
		t.Fatalf("%d children ran, want %d", len(lines), runners*rounds)
	}
	last := uint64(0)
	for _, line := range lines {
		name, tok, _ := strings.Cut(line, " ")
		n, err := strconv.ParseUint(tok, 10, 64)
		if name != "shared" || err != nil || n <= last {
			t.Fatalf("child saw %q after token %d", line, last)
		}
		last = n
	}
}

// run passes the child's status through, says 75 when it could not get
// the lock, and refuses bad usage.
func TestRunStatuses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := startEtcd(t, ctx)
	if err := runRun(ctx, []string{"--url", url, "s", "--", "sh", "-c", "exit 7"}); status(err) != 7 {
		t.Errorf("child exit 7: run = %v", err)
	}
	if err := runRun(ctx, []string{"--url", url, "s", "--", "sh", "-c", "kill -TERM $$"}); status(err) != 128+15 {
		t.Errorf("child killed by SIGTERM: run = %v, want status 143", err)
	}
	l := openT(t, ctx, url)
	lk, err := l.Lock(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	if err := runRun(ctx, []string{"--url", url, "--try", "held", "--", "true"}); status(err) != exitNotAcquired {
		t.Errorf("--try on a held lock: run = %v, want status %d", err, exitNotAcquired)
	}
	if err := runRun(ctx, []string{"--url", url, "--wait", "200ms", "held", "--", "true"}); status(err) != exitNotAcquired {
		t.Errorf("--wait on a held lock: run = %v, want status %d", err, exitNotAcquired)
	}
	lk.Unlock(ctx)
	var ue usageError
	for _, args := range [][]string{{"--url", url, "name"}, {"--url", url, "name", "--"}, {"--url", url, "--try", "--wait", "1s", "n", "--", "true"}, {"--bogus"}} {
		if err := runRun(ctx, args); !errors.As(err, &ue) {
			t.Errorf("run %q = %v, want a usage error", args, err)
		}
	}
}

// A lock lost while the child runs stops the child: SIGTERM, then SIGKILL
// after --grace for a child that ignores it; run exits with status 76.
func TestRunStopsChildOnLoss(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := startEtcd(t, ctx)
	l := openT(t, ctx, url)
	res := make(chan error, 1)
	go func() {
		res <- runRun(ctx, []string{"--url", url, "--ttl", "2s", "--grace", "300ms", "stuck", "--",
			"sh", "-c", `trap "" TERM; sleep 60`})
	}()
	whileRunning(t, ctx, res, func() bool {
		hs, err := l.Holders(ctx, "stuck")
		if err != nil {
			t.Fatal(err)
		}
		return len(hs) == 1
	})
	if _, err := l.ForceUnlock(ctx, "stuck"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-res:
		if status(err) != exitLockLost {
			t.Errorf("run after its lock was taken away = %v, want status %d", err, exitLockLost)
		}
	case <-ctx.Done():
		t.Fatal("the child was not stopped after the lock was lost")
	}
}

// A lost lock stops everything the command started: a process it left
// behind that ignores SIGTERM is killed after the grace, even though the
// command itself exited at once.
func TestRunStopsWhatTheChildStarted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := startEtcd(t, ctx)
	dir := t.TempDir()
	t.Setenv("DIR", dir)
	l := openT(t, ctx, url)
	res := make(chan error, 1)
	go func() {
		res <- runRun(ctx, []string{"--url", url, "--ttl", "2s", "--grace", "300ms", "family", "--",
			"sh", "-c", `(trap "" TERM; exec sleep 60) & echo $! > "$DIR/pid"; wait`})
	}()
	var pid int
	whileRunning(t, ctx, res, func() bool {
		if b, err := os.ReadFile(filepath.Join(dir, "pid")); err == nil && strings.HasSuffix(string(b), "\n") {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		return pid != 0
	})
	if _, err := l.ForceUnlock(ctx, "family"); err != nil {
		t.Fatal(err)
	}
	if err := <-res; status(err) != exitLockLost {
		t.Errorf("run = %v, want status %d", err, exitLockLost)
	}
	// run has SIGKILLed the group by now; the kernel ends the process
	// soon after, later on a loaded machine.
	for deadline := time.Now().Add(10 * time.Second); alive(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("the command's own child (pid %d) outlived the lost lock by 10s", pid)
			break
		}
	}
}

// alive reports whether pid runs (a zombie waiting to be reaped does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, after, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(after, "Z")
}

// whileRunning polls ok until it holds, failing if the run (res) ends
// first: a condition, not a sleep.
func whileRunning(t *testing.T, ctx context.Context, res <-chan error, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case err := <-res:
			t.Fatalf("run ended before the test was ready: %v", err)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// A lost lock's SIGTERM ends a shell and the child it waits for at once;
// run must then return, not wait out the whole --grace. The grace is 60s
// and the test's bound 30s: only a run that notices the group is gone
// passes, however slow the machine.
func TestRunReturnsOnceTheGroupIsGone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := startEtcd(t, ctx)
	dir := t.TempDir()
	t.Setenv("DIR", dir)
	l := openT(t, ctx, url)
	res := make(chan error, 1)
	go func() {
		res <- runRun(ctx, []string{"--url", url, "--ttl", "2s", "--grace", "60s", "shell", "--",
			"sh", "-c", `echo $$ > "$DIR/pid"; sleep 60; echo after`})
	}()
	// The shell waits for its sleep: the group has two processes.
	var sleeper int
	whileRunning(t, ctx, res, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "pid"))
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		sh, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		sleeper = childOf(sh)
		return sleeper != 0
	})
	start := time.Now()
	if _, err := l.ForceUnlock(ctx, "shell"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-res:
		if status(err) != exitLockLost {
			t.Errorf("run = %v, want status %d", err, exitLockLost)
		}
		t.Logf("run returned %v after the force-unlock", time.Since(start).Round(time.Millisecond))
	case <-time.After(30 * time.Second):
		t.Fatal("run still waits 30s after the lock was lost and its command was stopped: it waits out the 60s grace")
	}
	if alive(sleeper) {
		t.Errorf("the shell's child (pid %d) still runs", sleeper)
	}
}

// childOf returns a running child of pid, or 0.
func childOf(pid int) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		_, after, _ := strings.Cut(string(b), ") ")
		f := strings.Fields(after)
		if len(f) >= 2 && f[1] == strconv.Itoa(pid) && f[0] != "Z" {
			n, _ := strconv.Atoi(e.Name())
			return n
		}
	}
	return 0
}

// A hold lost between its grant and the command's start (a grant that came
// with little of its lease left, a pause, a forced release) never starts
// the command: it would run with nothing protecting it until the grace
// ran out.
func TestRunNeverStartsWithALostHold(t *testing.T) {
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	done := make(chan struct{})
	close(done)
	status, lost, err := supervise(done, nil, []string{"sh", "-c", "touch " + ran}, time.Second, make(chan os.Signal))
	if err != nil || !lost || status != notStarted {
		t.Fatalf("supervise with the hold already lost = %d, %v, %v; want notStarted, lost", status, lost, err)
	}
	if _, err := os.Stat(ran); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the command ran with the hold already lost (%v)", err)
	}
}

// A signal that comes while run waits for the lock ends the wait: the
// command never runs, and run exits with 128+N at once. SIGHUP and
// SIGQUIT used to be held back until the lock came (it never came while
// the holder kept it).
func TestRunInterruptedWhileWaiting(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := startEtcd(t, ctx)
	l := openT(t, ctx, url)
	lk, err := l.Lock(ctx, "waited")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(ctx)
	ran := filepath.Join(t.TempDir(), "ran")
	done := make(chan error, 1)
	go func() { done <- runRun(ctx, []string{"--url", url, "waited", "--", "touch", ran}) }()
	// run registers for the signals before it waits: once it waits, a
	// SIGHUP is its, not the test process's death.
	conformance.WaitFor(ctx, t, "run waiting for the lock", time.Minute, func() bool {
		hs, err := l.Holders(ctx, "waited")
		return err == nil && len(hs) == 1 && hs[0].Waiters == 1
	})
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if status(err) != 128+int(syscall.SIGHUP) {
			t.Fatalf("run interrupted by SIGHUP while waiting = %v (status %d), want %d", err, status(err), 128+int(syscall.SIGHUP))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run still waits for the lock 30s after a SIGHUP")
	}
	if _, err := os.Stat(ran); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the command ran (%v)", err)
	}
	select {
	case <-lk.Done():
		t.Fatalf("the holder lost its lock: %v", lk.Err())
	default:
	}
}

// Every signal that came before the command starts counts, not only the
// first: a SIGCONT ahead of a SIGHUP let the command start, and the SIGHUP
// then went to the new command. The command here cannot start at all (no
// such file), so an attempt to start it shows as an error: deterministic,
// where a command that ran would race the forwarded signal.
func TestRunSignalBehindAContinueStopsTheStart(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	sigs <- syscall.SIGCONT
	sigs <- syscall.SIGHUP
	missing := filepath.Join(t.TempDir(), "no-such-command")
	status, lost, err := supervise(make(chan struct{}), nil, []string{missing}, time.Second, sigs)
	if err != nil || lost || status != 128+int(syscall.SIGHUP) {
		t.Fatalf("supervise with SIGCONT, SIGHUP pending = %d, %v, %v; want %d and no attempt to start the command", status, lost, err, 128+int(syscall.SIGHUP))
	}
}
