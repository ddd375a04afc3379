package faults

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os/exec"
)

// Child roles: the processes a run starts besides the servers.
const (
	RoleWorker   = "worker"
	RoleResource = "resource"
)

// Spawner makes the command that runs a child of the suite in role with
// args: `padlock faults ROLE ARGS...` for the CLI, the test binary itself
// for the package's tests (see Child).
type Spawner func(role string, args []string) *exec.Cmd

// Child runs a child process's role until ctx ends, writing its events
// (and, for the resource, its ready line) on out.
func Child(ctx context.Context, role string, args []string, out io.Writer) error {
	switch role {
	case RoleResource:
		return runResource(ctx, out)
	case RoleWorker:
		fs := flag.NewFlagSet("faults worker", flag.ContinueOnError)
		var c workerConfig
		c.flags(fs)
		if err := fs.Parse(args); err != nil {
			return err
		}
		return runWorker(ctx, c, out)
	}
	return fmt.Errorf("faults: unknown role %q", role)
}
