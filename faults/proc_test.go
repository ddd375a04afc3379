//go:build unix

package faults

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A child the run asked to end (term) before it could catch SIGTERM, as a
// worker started just before its cell stops, did as asked: no failure. A
// child that SIGTERM ended without the run asking did not.
func TestTermedBeforeItsHandler(t *testing.T) {
	asked, err := startProc(exec.Command("sleep", "60"), 1, newHistory(), nil)
	if err != nil {
		t.Fatal(err)
	}
	asked.stop(20 * time.Second)
	if err := asked.failure(false); err != nil {
		t.Errorf("a child ended by the run's own SIGTERM: %v, want no failure", err)
	}

	unasked, err := startProc(exec.Command("sleep", "60"), 2, newHistory(), nil)
	if err != nil {
		t.Fatal(err)
	}
	unasked.signal(syscall.SIGTERM)
	select {
	case <-unasked.done:
	case <-time.After(20 * time.Second):
		unasked.kill()
		t.Fatal("sleep outlived SIGTERM by 20s")
	}
	if err := unasked.failure(false); err == nil {
		t.Error("a child that someone else's SIGTERM ended: no failure, want one")
	}
}

// A child that outlives stop's grace after SIGTERM is sent SIGQUIT, on
// which a Go child writes its goroutines' stacks, and its failure carries
// that output whole, to show where it hung.
func TestHungChildReportsItsStacks(t *testing.T) {
	script := `trap "" TERM; trap "echo goroutine 1 stuck here >&2; exit 2" QUIT; echo ready; while :; do sleep 0.1; done`
	ready := make(chan struct{})
	p, err := startProc(exec.Command("sh", "-c", script), 1, newHistory(), func(line string) bool {
		if line == "ready" {
			close(ready)
			return true
		}
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ready: // its traps are set
	case <-time.After(30 * time.Second):
		p.kill()
		t.Fatal("the child did not start within 30s")
	}
	p.stop(time.Second)
	err = p.failure(false)
	if err == nil || !strings.Contains(err.Error(), "goroutine 1 stuck here") || !strings.Contains(err.Error(), "did not end") {
		t.Errorf("failure of a child that ignored SIGTERM: %v, want its SIGQUIT output", err)
	}
}
