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
	stderr bytes.Buffer
	mu     sync.Mutex
	exited bool
}

// startProc starts cmd and feeds its events to h. ready, if set, is called
// with each line before it is parsed as an event; it reports whether the
// line was consumed.
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
		io.Copy(io.Discard, out)
		cmd.Wait()
		p.mu.Lock()
		p.exited = true
		p.mu.Unlock()
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

// kill kills the process and waits for it to exit.
func (p *proc) kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// stop asks the process to end (SIGTERM, after SIGCONT in case it is
// paused), and kills it if it has not within grace.
func (p *proc) stop(grace time.Duration) {
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
	}
}

// errors returns the end of the process's stderr, for messages.
func (p *proc) errors() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := strings.TrimSpace(p.stderr.String())
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	return s
}
