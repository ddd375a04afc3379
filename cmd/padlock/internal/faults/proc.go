package faults

import (
	"bufio"
	"bytes"
	"encoding/json"
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

// stop asks the process to end (SIGTERM, after SIGCONT in case it is
// paused), and kills it if it has not within grace.
func (p *proc) stop(grace time.Duration) {
	p.markEnded()
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
	}
}

// failure describes what went wrong with a process the run stopped (nil:
// it ended cleanly, or was killed on purpose): a non-zero exit (a panic,
// or a race report, which exits 66) or anything on its stderr.
func (p *proc) failure(killed bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := strings.TrimSpace(p.stderr.String())
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	switch {
	case killed && s == "":
		return nil
	case p.err != nil && !killed:
		return fmt.Errorf("%v: %s", p.err, s)
	case s != "":
		return fmt.Errorf("stderr: %s", s)
	}
	return nil
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
