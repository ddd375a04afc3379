package bench

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/padlock-go/padlock/padlocktest"
)

// recipeMatrix is a small matrix of the recipe workloads.
func recipeMatrix() Matrix {
	m := DefaultMatrix()
	m.R1Clients, m.S1Clients = []int{1, 4}, []int{4}
	return m
}

// runRecipes runs R1, S1 and E1 on g and checks that every cell ran
// every implementation that offers it, with the recipe shared, padlock's
// among them.
func runRecipes(t *testing.T, g *Group) *Report {
	t.Helper()
	rep := runRecipesOf(t, g, []string{R1, S1, E1}, nil)
	seen := map[string]bool{}
	for _, r := range rep.Results {
		seen[r.Workload+" "+r.Step+" "+r.Impl] = true
	}
	for _, want := range []string{"R1  padlock", "R1  padlock-mutex", "S1  padlock", "S1  padlock-mutex",
		"E1 hand-off padlock", "E1 failover padlock", "E1 observe padlock"} {
		if !seen[want] {
			t.Errorf("%s did not run: %v", want, seen)
		}
	}
	return rep
}

// runRecipesOf runs workloads on g with impls (all if nil) and checks
// that every cell ran every implementation that offers it, with the
// recipe shared.
func runRecipesOf(t *testing.T, g *Group, workloads, impls []string) *Report {
	t.Helper()
	// A cell whose recipe did not share in its turn runs again, longer:
	// on a loaded machine a turn of 300ms may hold too few acquisitions
	// for two readers (or n permits) to meet, while a recipe that cannot
	// share fails every turn.
	var rep *Report
	var err error
	for d := 300 * time.Millisecond; ; d *= 4 {
		rep, err = Run(context.Background(), Config{Groups: []*Group{g}, Workloads: workloads, Impls: impls, Matrix: recipeMatrix(),
			Duration: d, Rounds: 1})
		if !errors.Is(err, ErrNotShared) || d >= 4*time.Second {
			break
		}
		t.Logf("turns of %v: %v; again with turns of %v", d, err, 4*d)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.NA != "" {
			continue
		}
		if r.Acquisitions == 0 {
			t.Errorf("%s %s: no acquisitions", r.Cell, r.Impl)
		}
		if r.Workload == R1 && r.Clients > 1 && r.Role != RoleMutex && r.Most < 2 {
			t.Errorf("%s %s: at most %d holds at once", r.Cell, r.Impl, r.Most)
		}
		if r.Workload == S1 && r.Role != RoleMutex && r.Most != r.Limit {
			t.Errorf("%s %s: at most %d holds at once, want %d", r.Cell, r.Impl, r.Most, r.Limit)
		}
		if r.Role == RoleMutex && r.Most > 1 {
			t.Errorf("%s %s: the mutex held by %d at once", r.Cell, r.Impl, r.Most)
		}
		if r.Workload == E1 && r.Step == StepFailover && r.Wait.P50 <= 0 {
			t.Errorf("%s %s: failover p50 %v", r.Cell, r.Impl, r.Wait.P50)
		}
	}
	return rep
}

// TestRecipesSQLPeers runs R1 with the databases' own read-write locks,
// the ceiling padlock's SQL readers are measured against: on PostgreSQL
// and MariaDB their readers share (at least two inside at once) and the
// run's checker finds no writer inside with anyone.
func TestRecipesSQLPeers(t *testing.T) {
	for _, c := range []struct {
		kind  padlocktest.Kind
		peers []string
	}{
		{padlocktest.Postgres, []string{"row-lock", "pg_advisory_lock_shared"}},
		{padlocktest.MySQL, []string{"row-lock"}},
	} {
		t.Run(string(c.kind), func(t *testing.T) {
			t.Parallel()
			rep := runRecipesOf(t, startGroup(t, c.kind), []string{R1}, c.peers)
			for _, peer := range c.peers {
				if !slices.ContainsFunc(rep.Results, func(r Result) bool { return r.Impl == peer && r.Clients > 1 && r.Acquisitions > 0 }) {
					t.Errorf("%s did not run R1 with several clients", peer)
				}
			}
		})
	}
}

// TestRecipesMem runs the recipe workloads on mem://.
func TestRecipesMem(t *testing.T) {
	g, err := Open(context.Background(), "mem://bench-recipes")
	if err != nil {
		t.Fatal(err)
	}
	runRecipes(t, g)
}

// TestRecipesEtcd runs the recipe workloads on etcd, with its peers:
// recipes.RWMutex and concurrency.Election.
func TestRecipesEtcd(t *testing.T) {
	t.Parallel()
	rep := runRecipes(t, startGroup(t, padlocktest.Etcd))
	for _, want := range []string{"recipes.RWMutex", "concurrency.Election"} {
		if !slices.ContainsFunc(rep.Results, func(r Result) bool { return r.Impl == want && r.Acquisitions > 0 }) {
			t.Errorf("%s did not run", want)
		}
	}
}

// brokenReaders is a mem:// padlock whose readers are writers' equals:
// RLock lets a reader in beside a writer (it takes a permit of a
// semaphore that the writers' Lock does not see).
func TestRecipeCheckerCatchesBrokenReaders(t *testing.T) {
	g, err := Open(context.Background(), "mem://bench-broken-readers")
	if err != nil {
		t.Fatal(err)
	}
	im := g.Impls[0]
	broken := im
	broken.New = func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
		c, err := im.New(ctx, rt, prefix)
		if err != nil {
			return nil, err
		}
		return brokenRW{c.(*lockerClient)}, nil
	}
	g.Impls = []Impl{broken}
	m := recipeMatrix()
	m.R1Clients = []int{4}
	m.R1Readers = 0.5
	_, err = Run(context.Background(), Config{Groups: []*Group{g}, Workloads: []string{R1}, Matrix: m, Duration: time.Second, Rounds: 1, Impls: []string{"padlock"}})
	if !errors.Is(err, ErrViolation) {
		t.Fatalf("Run = %v, want ErrViolation", err)
	}
}

// brokenRW's readers take a name of their own: they never wait for a
// writer.
type brokenRW struct{ *lockerClient }

func (b brokenRW) RLock(ctx context.Context, name string) (Held, error) {
	return b.lockerClient.RLock(ctx, name+"-readers")
}

// A semaphore that grants more permits than asked fails S1.
func TestRecipeCheckerCatchesBrokenSemaphore(t *testing.T) {
	g, err := Open(context.Background(), "mem://bench-broken-semaphore")
	if err != nil {
		t.Fatal(err)
	}
	im := g.Impls[0]
	orig := im.New
	im.New = func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
		c, err := orig(ctx, rt, prefix)
		if err != nil {
			return nil, err
		}
		return brokenSemaphore{c.(*lockerClient)}, nil
	}
	g.Impls = []Impl{im}
	m := recipeMatrix()
	m.S1Clients = []int{16}
	_, err = Run(context.Background(), Config{Groups: []*Group{g}, Workloads: []string{S1}, Matrix: m, Duration: time.Second, Rounds: 1, Impls: []string{"padlock"}})
	if !errors.Is(err, ErrViolation) {
		t.Fatalf("Run = %v, want ErrViolation", err)
	}
}

// brokenSemaphore grants twice the permits asked for.
type brokenSemaphore struct{ *lockerClient }

func (b brokenSemaphore) LockLimit(ctx context.Context, name string, n int) (Held, error) {
	return b.lockerClient.LockLimit(ctx, name, 2*n)
}

// A read-write lock whose readers never overlap fails R1: it did not
// share.
func TestRecipeCheckerCatchesUnsharedReaders(t *testing.T) {
	rs := Result{Workload: R1, Impl: "x", Role: RolePadlock, Clients: 4, Most: 1}
	if err := rs.shared(); !errors.Is(err, ErrNotShared) {
		t.Errorf("R1 with one holder at most: %v", err)
	}
	rs = Result{Workload: S1, Impl: "x", Role: RolePadlock, Clients: 4, Limit: 4, Most: 3}
	if err := rs.shared(); !errors.Is(err, ErrNotShared) {
		t.Errorf("S1 short of its limit: %v", err)
	}
	rs.Role = RoleMutex
	if err := rs.shared(); err != nil {
		t.Errorf("the mutex baseline: %v", err)
	}
}
