package padlocktest

// The local provider starts real servers as child processes on free
// loopback ports in temporary directories. Each process can be killed,
// paused (SIGSTOP), resumed and restarted.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is one server process that can be stopped and started again with
// the same arguments, ports and data directory.
type process struct {
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

	// clock, if set, is the process's wall clock, moved by the fakeclock
	// library (whose environment is in Env); each start resets it to the
	// true time.
	clock *fakeClock

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd exits
	inited bool
}

// process lets a Group reach the Process of any node type that embeds one.
func (p *process) proc() *process { return p }

// Start starts the process and waits until it is ready (its Ready line,
// then its Probe), or for ctx.
func (p *process) Start(ctx context.Context) error {
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
	if p.clock != nil {
		if err := p.clock.reset(); err != nil {
			pw.Close()
			pr.Close()
			logf.Close()
			return fmt.Errorf("%s: fake clock: %w", p.Name, err)
		}
	}
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
func (p *process) tail() string {
	b, _ := os.ReadFile(filepath.Join(p.Dir, p.Name+".log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// Running reports whether the process is started and has not exited.
func (p *process) Running() bool {
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

func (p *process) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("%s is not running", p.Name)
	}
	return p.cmd.Process.Signal(sig)
}

// Pause stops the process with SIGSTOP: it keeps its sockets but answers
// nothing, like a long GC pause or a frozen VM.
func (p *process) Pause() error { return p.signal(syscall.SIGSTOP) }

// Resume continues a paused process.
func (p *process) Resume() error { return p.signal(syscall.SIGCONT) }

// Kill kills the process with SIGKILL and waits for it to exit.
func (p *process) Kill() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.killLocked()
}

func (p *process) killLocked() error {
	if p.cmd == nil {
		return nil
	}
	// SIGKILL ends a stopped (paused) process too: no SIGCONT first,
	// which would let it run, and answer, for a moment.
	p.cmd.Process.Kill()
	<-p.done
	p.cmd = nil
	return nil
}

// Stop asks the process to exit with SIGTERM and kills it after a grace period.
func (p *process) Stop() error {
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
func (p *process) Restart(ctx context.Context) error {
	if err := p.Kill(); err != nil {
		return err
	}
	return p.Start(ctx)
}

// etcdMain is the package of the embedded etcd server that etcdBinary builds.
const etcdMain = "github.com/padlock-go/padlock/padlocktest/cmd/padlock-etcd"

var build struct {
	once sync.Once
	path string
	err  error
}

var etcdCommand struct {
	sync.Mutex
	path string
	args []string
}

// UseEtcdCommand makes the local provider run path with args, followed by
// padlock-etcd's flags, as its embedded etcd server instead of building
// padlock-etcd: for a program that has the server in itself, as the
// padlock command does (`padlock etcd`), and may run where no Go module is.
func UseEtcdCommand(path string, args ...string) {
	etcdCommand.Lock()
	defer etcdCommand.Unlock()
	etcdCommand.path, etcdCommand.args = path, args
}

// embeddedEtcd returns the command of the embedded etcd server: the one
// UseEtcdCommand set, or padlock-etcd, built.
func embeddedEtcd() (string, []string, error) {
	etcdCommand.Lock()
	path, args := etcdCommand.path, etcdCommand.args
	etcdCommand.Unlock()
	if path != "" {
		return path, args, nil
	}
	path, err := etcdBinary()
	return path, nil, err
}

// etcdBinary builds padlock-etcd (embedded etcd v3.7) once per test process,
// without the race detector so that the server runs at full speed, and
// returns its path. Where the test's module (or workspace) declares it as
// a tool (`go get -tool` of etcdMain; padlock's own workspace does, in
// padlocktest/go.mod), the go command's build cache keeps the program
// (`go tool -n` builds it if it must and names it), and it is built and
// linked again only when one of its packages changed (or in a clone in
// another folder: see cachedTool), not once per test process; on Linux
// only (the lock cachedTool takes). Otherwise it is
// built in the test's own module, which requires padlocktest and so
// everything padlock-etcd imports, into the user's cache directory (one
// file, replaced by each build, never left behind in the temporary
// directory).
func etcdBinary() (string, error) {
	build.once.Do(func() {
		gobin, err := exec.LookPath("go")
		if err != nil {
			build.err = fmt.Errorf("%w: the go command, which builds the embedded etcd server (or set %s to an etcd binary)", ErrMissing, EtcdBinaryEnv)
			return
		}
		dir, err := cacheDir()
		if err != nil {
			build.err = err
			return
		}
		// Bounded, so that a go command stuck (on a module download, say)
		// fails the test instead of hanging it, and another test process
		// waiting for the lock gets it back: a build from a cold cache on
		// two busy cores takes a few minutes.
		ctx, cancel := context.WithTimeout(context.Background(), etcdBuildTimeout)
		defer cancel()
		if path := cachedTool(ctx, gobin, etcdMain, filepath.Join(dir, "padlock-etcd.lock")); path != "" {
			build.path = path
			return
		}
		// Built under a name of its own, then renamed over the last build:
		// a server another test process runs keeps its own file.
		tmp, err := os.CreateTemp(dir, "padlock-etcd-*.tmp")
		if err != nil {
			build.err = err
			return
		}
		tmp.Close()
		defer os.Remove(tmp.Name())
		cmd := exec.CommandContext(ctx, gobin, "build", "-o", tmp.Name(), etcdMain)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build %s: %v\n%s", etcdMain, err, out)
			return
		}
		build.path = filepath.Join(dir, "padlock-etcd")
		build.err = os.Rename(tmp.Name(), build.path)
	})
	return build.path, build.err
}

// etcdBuildTimeout bounds etcdBinary's go commands together.
const etcdBuildTimeout = 10 * time.Minute

// cachedTool returns the path of the program pkg as the go command's build
// cache keeps it, built without cgo, if the module or workspace of the
// current directory declares pkg as a tool; "" otherwise, or if the build
// fails or ctx ends (the caller's go build then reports why). One test process at a
// time asks, holding the file lock at lock: the go command writes a
// program into its cache in place, and two processes that missed the
// cache at once would each write it, one of them while the other's
// server runs it (ETXTBSY). After the first, every process finds it
// there. `go tool` takes no build flags from GOFLAGS (-trimpath, -race):
// the program is the same in every test process, built without the race
// detector, but a clone in a new folder builds its own once.
func cachedTool(ctx context.Context, gobin, pkg, lock string) string {
	unlock, err := lockFile(lock)
	if err != nil {
		return ""
	}
	defer unlock()
	cmd := exec.CommandContext(ctx, gobin, "tool", "-n", pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	path := strings.TrimSpace(string(out))
	if fi, err := os.Stat(path); err != nil || !filepath.IsAbs(path) || !fi.Mode().IsRegular() {
		return ""
	}
	return path
}

// cacheDir is padlocktest's folder in the user's cache directory (or the
// temporary one), where the programs it builds live between test runs.
func cacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "padlocktest")
	return dir, os.MkdirAll(dir, 0o755)
}
