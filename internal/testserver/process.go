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
	Name  string
	Path  string
	Args  []string
	Dir   string // working and log directory
	Ready string // a line on stdout that says the server is up ("" = none)

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd exits
}

// Start starts the process and waits for its Ready line, or for ctx.
func (p *Process) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("%s already running", p.Name)
	}
	logf, err := os.OpenFile(filepath.Join(p.Dir, p.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Dir = p.Dir
	cmd.Stderr = logf
	// Die with the test process, whatever happens to it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
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
		io.Copy(io.Discard, out)
		cmd.Wait()
		logf.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	select {
	case <-ready:
		return nil
	case <-done:
		p.cmd = nil
		return fmt.Errorf("%s exited before it was ready; log: %s", p.Name, p.tail())
	case <-ctx.Done():
		p.killLocked()
		return fmt.Errorf("%s not ready: %w; log: %s", p.Name, ctx.Err(), p.tail())
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
		root, err := moduleRoot()
		if err != nil {
			build.err = err
			return
		}
		build.dir, build.err = os.MkdirTemp("", "padlock-bin-")
		if build.err != nil {
			return
		}
		build.path = filepath.Join(build.dir, "padlock")
		cmd := exec.Command("go", "build", "-o", build.path, "./cmd/padlock")
		cmd.Dir = root
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

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the padlock module")
	}
	return filepath.Dir(mod), nil
}
