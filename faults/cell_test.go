package faults

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/padlock-go/padlock/padlocktest"
)

// A cell starts its faults only once every worker has opened its Locker:
// a worker slow to start (here: two seconds late) has made its first
// acquire by the time newCell returns, and one that exits before that
// fails the cell.
func TestCellWaitsForItsWorkers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := padlocktest.New(ctx, padlocktest.Redis)
	if errors.Is(err, padlocktest.ErrMissing) && !padlocktest.RequireServers() {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	b, err := BackendNamed("redis")
	if err != nil {
		t.Fatal(err)
	}
	sc := Scenarios[0]

	slow := func(role string, args []string) *exec.Cmd {
		cmd := testSpawn(role, args)
		if role == RoleWorker {
			cmd.Args = append([]string{"sh", "-c", `sleep 2; exec "$0" "$@"`, cmd.Path}, args...)
			cmd.Path, cmd.Err = exec.LookPath("sh")
		}
		return cmd
	}
	c, err := newCell(ctx, b, sc, srv, slow)
	if err != nil {
		t.Fatal(err)
	}
	evs := c.hist.snapshot()
	c.stop()
	c.close()
	for _, w := range c.workers {
		if lastAcquire(evs, w.client) == nil {
			t.Errorf("newCell returned before worker %d's first acquire", w.client)
		}
	}

	failing := func(role string, args []string) *exec.Cmd {
		if role == RoleWorker {
			return exec.Command("sh", "-c", "echo cannot open >&2; exit 1")
		}
		return testSpawn(role, args)
	}
	c, err = newCell(ctx, b, sc, srv, failing)
	if err == nil {
		c.stop()
		c.close()
		t.Fatal("newCell with workers that exit at once: no error")
	}
	if !strings.Contains(err.Error(), "exited before its first acquire") || !strings.Contains(err.Error(), "cannot open") {
		t.Errorf("newCell with workers that exit at once: %v", err)
	}
}
