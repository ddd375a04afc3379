//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
)

// syncBuffer is a bytes.Buffer that a command writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// elect on mem:// (the one backend that runs elections in one process
// here): the first candidate is elected and holds until interrupted, then
// resigns; a second one, bounded by --wait, exits 75; --observe prints the
// leader, then "no leader" after the resignation; with a command, the
// command sees its term's token and its status is elect's.
func TestElect(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := "mem://cli-elect"

	obsCtx, stopObserving := context.WithCancel(ctx)
	var observed syncBuffer
	obsDone := make(chan error, 1)
	go func() { obsDone <- runElect(obsCtx, []string{"--observe", "--url", url, "jobs"}, &observed) }()

	leadCtx, interrupt := context.WithCancel(ctx)
	var out syncBuffer
	leadDone := make(chan error, 1)
	go func() { leadDone <- runElect(leadCtx, []string{"--url", url, "jobs", "node-1"}, &out) }()
	conformance.WaitFor(ctx, t, "the first candidate elected", time.Minute, func() bool { return strings.Contains(out.String(), `elected: jobs "node-1"`) })
	conformance.WaitFor(ctx, t, "the observer to see node-1", time.Minute, func() bool { return strings.Contains(observed.String(), " node-1\n") })

	var ee exitError
	if err := runElect(ctx, []string{"--url", url, "--wait", "200ms", "jobs", "node-2"}, &bytes.Buffer{}); !errors.As(err, &ee) || ee.code != exitNotAcquired {
		t.Errorf("a second candidate bounded by --wait = %v, want exit status %d", err, exitNotAcquired)
	}
	interrupt()
	if err := <-leadDone; err != nil && !(errors.As(err, &ee) && ee.code == 0) {
		t.Fatalf("interrupted leader: %v", err)
	}
	if !strings.Contains(out.String(), "resigned: jobs") {
		t.Errorf("the interrupted leader did not resign:\n%s", out.String())
	}
	conformance.WaitFor(ctx, t, "the observer to see no leader", time.Minute, func() bool { return strings.HasSuffix(observed.String(), "no leader\n") })
	stopObserving()
	if err := <-obsDone; err != nil {
		t.Errorf("observe: %v", err)
	}

	dir := t.TempDir()
	err := runElect(ctx, []string{"--url", url, "jobs", "node-3", "--", "sh", "-c",
		`echo "$PADLOCK_NAME $PADLOCK_VALUE $PADLOCK_TOKEN" > "` + filepath.Join(dir, "env") + `"; exit 7`}, &bytes.Buffer{})
	if !errors.As(err, &ee) || ee.code != 7 {
		t.Errorf("elect with a command exiting 7 = %v, want status 7", err)
	}
	env, rerr := os.ReadFile(filepath.Join(dir, "env"))
	if f := strings.Fields(string(env)); rerr != nil || len(f) != 3 || f[0] != "jobs" || f[1] != "node-3" || f[2] == "0" {
		t.Errorf("the command's environment: %q (%v)", env, rerr)
	}
	l, err := padlock.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Election("jobs").Leader(ctx); !errors.Is(err, padlock.ErrNoLeader) {
		t.Errorf("after every candidate is done, Leader = %v, want ErrNoLeader", err)
	}
}
