package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/padlock-go/padlock/padlocktest"
)

// roleEnv makes the test binary a child of a run (a worker or the
// resource) instead of running tests.
const roleEnv = "PADLOCK_FAULTS_ROLE"

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		err := Child(ctx, role, os.Args[1:], os.Stdout)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if children.dir != "" {
		os.RemoveAll(children.dir)
	}
	os.Exit(code)
}

// raceBuild is set in a -race build of this package's tests (race_test.go).
var raceBuild bool

// children is the program that runs a run's children, built once per
// test process (childProgram).
var children struct {
	once sync.Once
	dir  string // the build's temporary folder, removed by TestMain
	path string
	err  error
}

// childProgram returns the program that runs a run's children: this test
// binary, or, when it is a -race build, a build of this package's tests
// without -race, as padlock faults runs its children. The race detector
// makes a worker several times dearer in CPU, and the suite runs on two
// busy cores, where a worker's CPU is the fault's timing. Races in the
// client paths the workers drive are still looked for: the conformance
// suite runs the same faults (a client cut off, killed, blackholed; a
// server restarted, stopped, failed over) under -race on every backend,
// and this process, -race still, runs the checker, the proxies and the
// Lockers of the leak checks.
//
// PADLOCK_FAULTS_RACE=1 runs the children from this binary itself, -race
// and all, each sleeping a second at exit so that goroutines still running
// can report a race (GORACE atexit_sleep_ms), the resource excepted: it
// has none left once the run asks it for its final state.
func childProgram() (string, error) {
	if !raceBuild || os.Getenv("PADLOCK_FAULTS_RACE") == "1" {
		return os.Args[0], nil
	}
	children.once.Do(func() {
		gobin, err := exec.LookPath("go")
		if err != nil {
			children.err = fmt.Errorf("the go command, which builds the fault suite's children: %w", err)
			return
		}
		if children.dir, err = os.MkdirTemp("", "padlock-faults-"); err != nil {
			children.err = err
			return
		}
		path := filepath.Join(children.dir, "faults-children.test")
		// The package's own folder: go test runs its binary there. Bounded,
		// so that a go command stuck (on a module download, say) fails the
		// run instead of hanging it; a build from a cold cache on two busy
		// cores takes a few minutes.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, gobin, "test", "-c", "-o", path, ".")
		if out, err := cmd.CombinedOutput(); err != nil {
			children.err = fmt.Errorf("go test -c (the fault suite's children, without -race): %v\n%s", err, out)
			return
		}
		children.path = path
	})
	return children.path, children.err
}

// testSpawn starts a child of a run: the program childProgram returns.
// A failure to build it is the command's error (cmd.Err), which the run
// reports when it starts the child.
func testSpawn(role string, args []string) *exec.Cmd {
	path, err := childProgram()
	if err != nil {
		cmd := exec.Command(os.Args[0])
		cmd.Err = err
		return cmd
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), roleEnv+"="+role)
	if role == RoleResource && path == os.Args[0] {
		cmd.Env = append(cmd.Env, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	}
	return cmd
}

// TestScenarios runs every scenario briefly on every backend and asserts
// each expected outcome: the positive control (a paused holder) must
// overlap on every backend, fencing must reject every stale write where
// tokens are monotonic, and the other faults must keep exclusion. Lanes
// of backends run side by side (PADLOCK_FAULTS_PARALLEL, default
// testLanes), each on servers of its own.
func TestScenarios(t *testing.T) {
	backends := Backends
	if only := os.Getenv("PADLOCK_FAULTS_BACKENDS"); only != "" {
		backends = nil
		for _, name := range strings.Split(only, ",") {
			b, err := BackendNamed(name)
			if err != nil {
				t.Fatal(err)
			}
			backends = append(backends, b)
		}
	}
	scenarios, err := ScenariosByID(os.Getenv("PADLOCK_FAULTS_SCENARIOS"))
	if err != nil {
		t.Fatal(err)
	}
	lanes := testLanes
	if s := os.Getenv("PADLOCK_FAULTS_PARALLEL"); s != "" {
		if lanes, err = strconv.Atoi(s); err != nil || lanes < 1 {
			t.Fatalf("PADLOCK_FAULTS_PARALLEL=%q: want a positive number of lanes", s)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	out := os.Getenv("PADLOCK_FAULTS_OUT") // keep the histories there
	if out == "" {
		out = t.TempDir()
	}
	// A line per cell where scripts/test shows progress: this package
	// runs for minutes.
	// The recipes' cells run one fault each, on one configuration per
	// backend family (testRecipeBackends); padlock faults --all runs
	// them on every configuration.
	// The starvation scenario runs for 30s, on the backend it was
	// written for (testStarveBackends).
	recipeOn, starveOn := testRecipeBackends, testStarveBackends
	if os.Getenv("PADLOCK_FAULTS_BACKENDS") != "" {
		recipeOn, starveOn = nil, nil // every backend asked for
	}
	results, err := Run(ctx, Options{Backends: backends, Scenarios: scenarios, Faults: 2, RecipeFaults: 1,
		RecipeBackends: recipeOn, StarveBackends: starveOn, Parallel: lanes, Spawn: testSpawn, Out: out,
		Progress: padlocktest.Progress("faults: ")})
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			// The failures are reported after every cell's line and
			// history, so that they are the last lines of the subtest's
			// output: a CI log that keeps only its tail still says which
			// cell failed and why.
			var failed []string
			defer func() {
				for _, f := range failed {
					t.Error(f)
				}
			}()
			for _, r := range results {
				if r.Backend != b.Name {
					continue
				}
				if r.NotRun != "" {
					t.Logf("%2d %-16s n/a: %s", r.Scenario, r.Name, r.NotRun)
				}
				if r.Expected == NA {
					continue
				}
				t.Logf("%2d %-16s expected %-4s measured %s, ops %4d faults %d overlaps %d (%v, longest %v) stale unfenced %d, fenced accepted %d (before contact %d) rejected %d, fresh rejected %d, token order %d, model %s, lost %d/%d, late Done %d (%v), detect %v, recover %v, leaks %d: %s",
					r.Scenario, r.Name, r.Expected, r.Measured, r.Ops, r.Faults, r.Overlaps, r.OverlapTime.Round(time.Millisecond), r.OverlapMax.Round(time.Millisecond),
					r.StaleUnfenced, r.StaleFencedAccepted, r.StaleBeforeContact, r.StaleFencedRejected, r.FreshRejected,
					r.TokenOrder, r.Tokens, r.LostUnfenced, r.LostFenced, r.LateDone, r.LateDoneMax.Round(time.Millisecond),
					r.Detect.Round(time.Millisecond), r.Recover.Round(time.Millisecond), r.Leaks, r.Verdict)
				if r.Stalled > 0 {
					t.Logf("%2d %-16s %d holder(s) whose Done their stalled process held up, up to %v after the next grant (excused: the cell allows %d)",
						r.Scenario, r.Name, r.Stalled, r.StalledMax.Round(time.Millisecond), stallBudget(r.Faults))
				}
				if r.Clients > 0 {
					t.Logf("%2d %-16s %d clients over %v: fewest grants %d, longest wait %v, starved %d",
						r.Scenario, r.Name, r.Clients, r.Ran.Round(time.Second), r.FewestGrants, r.MaxWait.Round(time.Millisecond), r.Starved)
				}
				if r.Verdict != "ok" && r.Verdict != "n/a" {
					logHistory(t, r.history)
					failed = append(failed, fmt.Sprintf("scenario %d (%s) on %s: %s", r.Scenario, r.Name, b.Name, r.Verdict))
				}
			}
		})
	}
	if errors.Is(err, padlocktest.ErrMissing) && !padlocktest.RequireServers() {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// testRecipeBackends are the backends TestScenarios runs the recipes'
// scenarios on: one configuration per backend family, to keep
// ./scripts/test within its time (docs/testing.md).
var testRecipeBackends = []string{"etcd", "redis", "zookeeper", "postgres", "mysql"}

// testStarveBackends are the backends TestScenarios runs the starvation
// scenario on (Scenario.Starve, 30s a cell): MySQL/MariaDB in both modes,
// whose polling waiters starved before they waited in a server-side
// queue; padlock faults --all runs it on every configuration.
var testStarveBackends = []string{"mysql", "mysql-advisory"}

// testLanes is how many lanes TestScenarios runs at once by default:
// measured in docs/testing.md to keep every cell's outcome on a loaded
// 2-core machine.
const testLanes = 3

// logHistory logs a failed cell's history, for the CI log.
func logHistory(t *testing.T, evs []Event) {
	t.Helper()
	if len(evs) == 0 {
		return
	}
	var b strings.Builder
	t0 := evs[0].T
	for _, e := range evs {
		fmt.Fprintf(&b, "%9.3fs c%-2d %-7s %-6s tok=%d", float64(e.T-t0)/1e9, e.Client, e.Op, e.Phase, e.Token)
		if e.Register != "" {
			fmt.Fprintf(&b, " %s", e.Register)
		}
		if e.Accepted != nil {
			fmt.Fprintf(&b, " accepted=%v", *e.Accepted)
		}
		if e.Fault != "" {
			fmt.Fprintf(&b, " %s", e.Fault)
		}
		if e.Err != "" {
			fmt.Fprintf(&b, " err=%s", e.Err)
		}
		b.WriteByte('\n')
	}
	t.Logf("history:\n%s", b.String())
}
