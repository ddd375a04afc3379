package faults

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a child process of the run, whose stdout carries events.
type proc struct {
	client int
	cmd    *exec.Cmd
	done   chan struct{} // closed when the process has exited and its output is read
	mu     sync.Mutex
	stderr bytes.Buffer
	ended  bool  // the run ended it on purpose (stop or kill)
	termed bool  // it was sent SIGTERM (once: a second could kill it)
	hung   bool  // it outlived stop's grace: stderr holds its goroutines
	err    error // cmd.Wait's
}

// startProc starts cmd and feeds its events to h. ready, if set, is called
// with each line before it is parsed as an event; it reports whether the
// line was consumed. A process that exits without the run ending it gets
// an exit event (Info), stamped when its output ends, which closes its
// critical section.
func startProc(cmd *exec.Cmd, client int, h *history, ready func(line string) bool) (*proc, error) {
	p := &proc{client: client, cmd: cmd, done: make(chan struct{})}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = &lockedWriter{mu: &p.mu, w: &p.stderr}
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if ready != nil && ready(line) {
				continue
			}
			var e Event
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				p.mu.Lock()
				fmt.Fprintf(&p.stderr, "unparsed output: %s\n", line)
				p.mu.Unlock()
				continue
			}
			h.add(e)
		}
		eof := now()
		io.Copy(io.Discard, out)
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		ended := p.ended
		p.mu.Unlock()
		if !ended && client > 0 {
			h.add(Event{T: eof, Client: client, Op: OpExit, Phase: Info, Err: fmt.Sprint(err)})
		}
	}()
	return p, nil
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (p *proc) signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

func (p *proc) markEnded() {
	p.mu.Lock()
	p.ended = true
	p.mu.Unlock()
}

// kill kills the process and returns the time of the kill (taken once the
// signal is sent: the process can do nothing after it), then waits up to
// half a minute for it to be reaped.
func (p *proc) kill() int64 {
	p.markEnded()
	p.cmd.Process.Kill()
	t := now()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
	}
	return t
}

// stop asks the process to end (term), and kills it if it has not within
// grace: first with SIGQUIT, on which the Go runtime writes every
// goroutine's stack to stderr (failure reports them whole, to show where
// it hung), then, if that did not end it, with SIGKILL.
func (p *proc) stop(grace time.Duration) {
	p.term()
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	p.mu.Lock()
	p.hung = true
	p.mu.Unlock()
	p.signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.kill()
	}
}

// term asks the process to end (SIGTERM, after SIGCONT in case it is
// paused), once, without waiting: processes built with -race sleep a
// second at exit (GORACE atexit_sleep_ms), which those stopped together
// spend together.
func (p *proc) term() {
	p.mu.Lock()
	p.ended = true
	again := p.termed
	p.termed = true
	p.mu.Unlock()
	if !again {
		p.signal(syscall.SIGCONT)
		p.signal(syscall.SIGTERM)
	}
}

// failure describes what went wrong with a process the run stopped (nil:
// it ended cleanly, or was killed on purpose): a non-zero exit (a panic,
// or a race report, which exits 66) or anything on its stderr. A race
// report wholly inside go-zookeeper is known upstream and not counted
// (see knownRace).
func (p *proc) failure(killed bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	full := strings.TrimSpace(p.stderr.String())
	if p.hung {
		return fmt.Errorf("did not end within its grace after SIGTERM; its goroutines at SIGQUIT:\n%s", full)
	}
	rest, known := splitKnownRaces(full)
	s := rest
	if len(s) > 4000 {
		s = s[len(s)-4000:]
	}
	exitErr := p.err
	var ee *exec.ExitError
	if p.termed && errors.As(exitErr, &ee) {
		// Asked to end before it could catch SIGTERM (a worker started
		// just before the cell stopped, still starting): it did as asked.
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
			exitErr = nil
		}
	}
	if known > 0 && rest == "" {
		if errors.As(exitErr, &ee) && ee.ExitCode() == 66 { // the race detector's exit code
			exitErr = nil
		}
	}
	switch {
	case killed && s == "":
		return nil
	case exitErr != nil && !killed:
		return fmt.Errorf("%v: %s", exitErr, s)
	case s != "":
		return fmt.Errorf("stderr: %s", s)
	}
	return nil
}

// raceSep delimits the race detector's reports.
const raceSep = "=================="

// splitKnownRaces takes out of stderr the race reports whose every racing
// access is inside go-zookeeper (v1.0.4, the latest), which padlock cannot
// reach: its Conn.sendSetWatches reads lastZxid while its recvLoop writes
// it, on a reconnect with watches set (samuel/go-zookeeper#178 and #260,
// go-zookeeper/zk#35); and its CreateContainer reads the response's path
// after its request gave up with ErrConnectionClosed (the Conn closing),
// while recvLoop is still decoding a late answer into it, although
// request's own comment says callers must not (padlock discards that
// path). It returns the rest and how many it took out.
func splitKnownRaces(stderr string) (string, int) {
	var rest []string
	known := 0
	parts := strings.Split(stderr, raceSep)
	for i := 0; i < len(parts); i++ {
		part := parts[i]
		if strings.Contains(part, "WARNING: DATA RACE") && knownRace(part) {
			known++
			continue
		}
		if known > 0 && strings.HasPrefix(strings.TrimSpace(part), "Found ") && strings.Contains(part, "data race(s)") {
			continue
		}
		if t := strings.TrimSpace(part); t != "" {
			rest = append(rest, t)
		}
	}
	return strings.Join(rest, "\n"), known
}

// knownRace reports whether each access of a race report is in
// go-zookeeper: the first frame under each "... at" line that is not the
// standard library's reflect or runtime (which go-zookeeper's decoder
// calls).
func knownRace(report string) bool {
	lines := strings.Split(report, "\n")
	accesses := 0
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if !(strings.HasPrefix(l, "Write at") || strings.HasPrefix(l, "Read at") ||
			strings.HasPrefix(l, "Previous write at") || strings.HasPrefix(l, "Previous read at")) {
			continue
		}
		accesses++
		frame := ""
		for _, f := range lines[i+1:] {
			f = strings.TrimSpace(f)
			if f == "" || strings.HasPrefix(f, "/") { // a file:line, or the end of the stack
				if f == "" {
					break
				}
				continue
			}
			if strings.HasPrefix(f, "reflect.") || strings.HasPrefix(f, "runtime.") {
				continue
			}
			frame = f
			break
		}
		if !strings.HasPrefix(frame, "github.com/go-zookeeper/zk.") {
			return false
		}
	}
	return accesses > 0
}

// exitedNow reports whether the process has exited.
func (p *proc) exitedNow() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
