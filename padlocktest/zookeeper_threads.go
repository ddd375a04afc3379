package padlocktest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/padlock-go/padlock/conformance"
)

// zkServingThreads are the names (as a thread dump begins them) of the
// threads through which a ZooKeeper server accepts clients, reads their
// requests and grants their sessions.
var zkServingThreads = []string{"NIOServerCxnFactory", "NIOWorkerThread", "SessionTracker",
	"ProcessThread", "SyncThread", "RequestThrottler", "ConnnectionExpirer", "ConnectionExpirer"}

// ZooKeeperThreads asks the JVM of the ZooKeeper server n for a thread
// dump (SIGQUIT: the JVM prints every thread's stack on its output and
// runs on) and returns the stacks of the threads that accept clients and
// grant sessions, for a test's error message: what a server that takes no
// new session is doing. It returns "" for any other node, and what it
// could get within 5 seconds, after the process's scheduling state then (a
// stopped process, state T, prints no dump).
func ZooKeeperThreads(n *Node) string {
	z, ok := n.ops.(*zkNode)
	if !ok {
		return ""
	}
	log := filepath.Join(z.Dir, z.Name+".log")
	fi, err := os.Stat(log)
	if err != nil {
		return ""
	}
	from := fi.Size()
	if err := z.signal(syscall.SIGQUIT); err != nil {
		return z.state() + "; no thread dump: " + err.Error()
	}
	var dump string
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conformance.Poll(ctx, 100*time.Millisecond, func() bool {
		b, err := os.ReadFile(log)
		if err != nil || int64(len(b)) < from {
			return false
		}
		dump = string(b[from:])
		return strings.Contains(dump, "JNI global refs") // the dump's last line
	})
	var keep []string
	for _, block := range strings.Split(dump, "\n\n") {
		first, _, _ := strings.Cut(strings.TrimSpace(block), "\n")
		for _, name := range zkServingThreads {
			if strings.HasPrefix(first, `"`+name) {
				keep = append(keep, strings.TrimSpace(block))
				break
			}
		}
	}
	if len(keep) == 0 {
		return z.state() + "; no thread dump within 5s"
	}
	return z.state() + "\n" + strings.Join(keep, "\n\n")
}

// state is the process's scheduling state as Linux reports it (the third
// field of /proc/PID/stat: R running, S sleeping, T stopped, ...): a
// server that answers nothing may be stopped.
func (p *process) state() string {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return "process: not started"
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		return fmt.Sprintf("process %d: %v", cmd.Process.Pid, err)
	}
	// pid (comm) state ...: comm may hold spaces, so the state follows the last ')'.
	rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
	f := strings.Fields(rest)
	if len(f) == 0 {
		return fmt.Sprintf("process %d: unreadable stat %q", cmd.Process.Pid, b)
	}
	return fmt.Sprintf("process %d: state %s", cmd.Process.Pid, f[0])
}
