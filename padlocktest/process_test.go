package padlocktest

import (
	"context"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func shell(t *testing.T, script string) *process {
	t.Helper()
	dir := t.TempDir()
	p := &process{Name: "sh", Path: "/bin/sh", Args: []string{"-c", script}, Dir: dir}
	t.Cleanup(func() { p.Kill() })
	return p
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A server that announces itself on stderr is ready when it says so.
func TestReadyLineOnStderr(t *testing.T) {
	p := shell(t, "echo starting; echo 'now ready' >&2; exec sleep 60")
	p.Ready = "now ready"
	if err := p.Start(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	if !p.Running() {
		t.Fatal("not running after Start")
	}
	log, _ := os.ReadFile(filepath.Join(p.Dir, "sh.log"))
	if !strings.Contains(string(log), "starting") || !strings.Contains(string(log), "now ready") {
		t.Errorf("log lacks stdout or stderr: %q", log)
	}
}

// Start waits for the probe, not just for the process to exist.
func TestProbeDecidesReadiness(t *testing.T) {
	p := shell(t, "sleep 0.3; touch up; exec sleep 60")
	p.Probe = func(context.Context) error {
		if _, err := os.Stat(filepath.Join(p.Dir, "up")); err != nil {
			return errors.New("not up yet")
		}
		return nil
	}
	if err := p.Start(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(p.Dir, "up")); err != nil {
		t.Fatal("Start returned before the probe could pass")
	}
}

// A process that exits while probed fails Start with its log.
func TestProbeOfExitedProcess(t *testing.T) {
	p := shell(t, "echo 'fatal: no config'; exit 3")
	p.Probe = func(context.Context) error { return errors.New("never up") }
	err := p.Start(ctxFor(t))
	if err == nil || !strings.Contains(err.Error(), "no config") {
		t.Fatalf("Start = %v, want an error quoting the log", err)
	}
}

// Init runs once, before the first Start, not again on Restart.
func TestInitRunsOnce(t *testing.T) {
	p := shell(t, "exec sleep 60")
	inits := 0
	p.Init = func(context.Context) error { inits++; return nil }
	ctx := ctxFor(t)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if inits != 1 {
		t.Errorf("Init ran %d times, want 1", inits)
	}
}

// As root, a process runs as the named user and owns its directory.
func TestRunAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root can run a process as another user")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody")
	}
	p := shell(t, "id -u > uid; exec sleep 60")
	p.User = "nobody"
	p.Probe = func(context.Context) error {
		b, err := os.ReadFile(filepath.Join(p.Dir, "uid"))
		if err != nil || len(b) == 0 {
			return errors.New("no uid yet")
		}
		return nil
	}
	if err := p.Start(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(p.Dir, "uid"))
	if got := strings.TrimSpace(string(b)); got != u.Uid {
		t.Errorf("process ran as uid %s, want nobody's %s", got, u.Uid)
	}
	st, _ := os.Stat(p.Dir)
	if uid := strconv.Itoa(int(statUID(st))); uid != u.Uid {
		t.Errorf("directory owned by uid %s, want %s", uid, u.Uid)
	}
}

// A group removes its directory on Close, also after a failed start.
func TestGroupCloseRemovesDir(t *testing.T) {
	g, err := newGroup[*redisNode]("padlock-grouptest-")
	if err != nil {
		t.Fatal(err)
	}
	g.Nodes = append(g.Nodes, &redisNode{process: &process{Name: "missing", Path: "/nonexistent/server", Dir: g.Dir()}})
	if err := g.startAll(ctxFor(t)); err == nil {
		t.Fatal("starting a missing binary succeeded")
	}
	g.Close()
	if _, err := os.Stat(g.Dir()); !os.IsNotExist(err) {
		t.Errorf("group directory %s left behind: %v", g.Dir(), err)
	}
}
