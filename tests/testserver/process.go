// Package testserver starts real servers as child processes on free loopback
// ports in temporary directories, for padlock's tests, benchmarks and fault
// suite. Each process can be killed, paused (SIGSTOP), resumed and restarted.
// Nothing here is a mock: the tests talk to the real server.
package testserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/padlock-go/padlock/internal/netutil"
)

// RequireServers reports whether a missing server must fail the run instead
// of skipping (PADLOCK_REQUIRE_SERVERS=1, set by CI).
func RequireServers() bool { return os.Getenv("PADLOCK_REQUIRE_SERVERS") == "1" }

// Process is one server process that can be stopped and started again with
// the same arguments, ports and data directory.
type Process struct {
	Name string
	Path string
	Args []string
	Env  []string // added to the test process's environment
	Dir  string   // working and log directory

	// Ready is a line on stdout or stderr that says the server is up ("":
	// none). Probe, if set, is then polled until it returns nil: readiness
	// by a function (a dial, a PING, ZooKeeper's ruok, pg_isready) for
	// servers whose log lines are not a promise.
	Ready string
	Probe func(ctx context.Context) error

	// Init, if set, runs once before the first Start, for servers that need
	// a data directory made first (initdb, mariadb-install-db).
	Init func(ctx context.Context) error

	// User, if set and the tests run as root, is the account the process
	// runs as (PostgreSQL refuses to run as root); Dir is given to it.
	User string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd exits
	inited bool
}

// process lets a Group reach the Process of any node type that embeds one.
func (p *Process) process() *Process { return p }

// Start starts the process and waits until it is ready (its Ready line,
// then its Probe), or for ctx.
func (p *Process) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("%s already running", p.Name)
	}
	attr, err := sysProcAttr(p.User, p.Dir)
	if err != nil {
		return fmt.Errorf("%s: %w", p.Name, err)
	}
	if !p.inited && p.Init != nil {
		if err := p.Init(ctx); err != nil {
			return fmt.Errorf("%s: init: %w", p.Name, err)
		}
	}
	p.inited = true
	logf, err := os.OpenFile(filepath.Join(p.Dir, p.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	// stdout and stderr share one pipe, read line by line into the log:
	// servers announce readiness on either.
	pr, pw, err := os.Pipe()
	if err != nil {
		logf.Close()
		return err
	}
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Dir = p.Dir
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = attr
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		logf.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		seen := p.Ready == ""
		if seen {
			close(ready)
		}
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			if !seen && strings.Contains(sc.Text(), p.Ready) {
				seen = true
				close(ready)
			}
		}
		io.Copy(io.Discard, pr)
		cmd.Wait()
		pr.Close()
		logf.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	fail := func(err error) error {
		p.killLocked()
		return fmt.Errorf("%s not ready: %w; log: %s", p.Name, err, p.tail())
	}
	select {
	case <-ready:
	case <-done:
		p.cmd = nil
		return fmt.Errorf("%s exited before it was ready; log: %s", p.Name, p.tail())
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	if p.Probe == nil {
		return nil
	}
	for {
		err := p.Probe(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-done:
			p.cmd = nil
			return fmt.Errorf("%s exited before it was ready (last probe: %v); log: %s", p.Name, err, p.tail())
		case <-ctx.Done():
			return fail(fmt.Errorf("%w (last probe: %v)", ctx.Err(), err))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tail returns the end of the process log, for error messages.
func (p *Process) tail() string {
	b, _ := os.ReadFile(filepath.Join(p.Dir, p.Name+".log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// Running reports whether the process is started and has not exited.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *Process) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("%s is not running", p.Name)
	}
	return p.cmd.Process.Signal(sig)
}

// Pause stops the process with SIGSTOP: it keeps its sockets but answers
// nothing, like a long GC pause or a frozen VM.
func (p *Process) Pause() error { return p.signal(syscall.SIGSTOP) }

// Resume continues a paused process.
func (p *Process) Resume() error { return p.signal(syscall.SIGCONT) }

// Kill kills the process with SIGKILL and waits for it to exit.
func (p *Process) Kill() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.killLocked()
}

func (p *Process) killLocked() error {
	if p.cmd == nil {
		return nil
	}
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.cmd.Process.Kill()
	<-p.done
	p.cmd = nil
	return nil
}

// Stop asks the process to exit with SIGTERM and kills it after a grace period.
func (p *Process) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil
	}
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		p.cmd = nil
		return nil
	case <-time.After(10 * time.Second):
		return p.killLocked()
	}
}

// Restart kills the process and starts it again with the same arguments.
func (p *Process) Restart(ctx context.Context) error {
	if err := p.Kill(); err != nil {
		return err
	}
	return p.Start(ctx)
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) { return netutil.FreePort() }

var build struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// PadlockBinary builds ./cmd/padlock (without the race detector, so that
// servers run at full speed) once per test process and returns its path.
func PadlockBinary() (string, error) {
	build.once.Do(func() {
		root, err := repoRoot()
		if err != nil {
			build.err = err
			return
		}
		build.dir, build.err = os.MkdirTemp("", "padlock-bin-")
		if build.err != nil {
			return
		}
		build.path = filepath.Join(build.dir, "padlock")
		// Built inside its own module, so this works with and without go.work.
		cmd := exec.Command("go", "build", "-o", build.path, ".")
		cmd.Dir = filepath.Join(root, "cmd", "padlock")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build ./cmd/padlock: %v\n%s", err, out)
		}
	})
	return build.path, build.err
}

// Cleanup removes what PadlockBinary built. Call it from TestMain.
func Cleanup() {
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
}

// repoRoot finds the padlock repository: the nearest directory above this
// test's module that holds cmd/padlock.
func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside a padlock module")
	}
	for dir := filepath.Dir(mod); ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "cmd", "padlock", "main.go")); err == nil {
			return dir, nil
		}
		if dir == filepath.Dir(dir) {
			return "", fmt.Errorf("no cmd/padlock above %s", mod)
		}
	}
}
