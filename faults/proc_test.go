//go:build unix

package faults

import (
	"os/exec"
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
