package bench

import (
	"context"
	"fmt"
	"time"
)

// Role says what an implementation is for in a comparison.
type Role string

// The roles.
const (
	// RoleRTT is the round-trip floor: the cheapest request the client
	// library can make (PING, a serializable Get, exists, SELECT 1), as the
	// "lock", and nothing as the release.
	RoleRTT Role = "rtt"
	// RoleFloor is the wire floor: the minimal raw sequence of a lock and
	// its release in the same client library, without waiting, renewal or
	// reentrancy.
	RoleFloor Role = "floor"
	// RoleFencedFloor is the wire floor with what padlock's guarantees
	// put on the wire: each grant takes a fencing token above every
	// earlier grant's, in the request that grants it, and the release
	// frees only its own hold. Without waiting, renewal, reentrancy,
	// identity or wake-ups, it is the least any client must send for
	// those guarantees: where it is slower than the floor, padlock cannot
	// reach the floor's speed either.
	RoleFencedFloor Role = "fenced-floor"
	// RolePadlock is padlock.
	RolePadlock Role = "padlock"
	// RolePeer is a native lock client that padlock competes with.
	RolePeer Role = "peer"
	// RoleMutex is padlock's mutex on a recipe's workload (every
	// acquisition a Lock on the same name): the baseline the recipe must
	// beat.
	RoleMutex Role = "mutex"
)

// Impl is one way to take a lock on one backend.
type Impl struct {
	// Name identifies it in tables and charts ("padlock", "redsync").
	Name string
	Role Role
	// MinRT is the theoretical minimum of round trips of one uncontended
	// acquisition and release: what the backend's protocol needs.
	MinRT int
	// Waits says whether Lock waits for a lock that is held (padlock and
	// the peers); floors do not, and run only on distinct names.
	Waits bool
	// Tokens says whether Lock returns fencing tokens to check.
	Tokens bool
	// Fenced marks a floor that is a fenced floor as it is (its tokens
	// rise in grant order and its release frees only its own hold):
	// padlock is measured against it where its group has no
	// RoleFencedFloor of its own.
	Fenced bool
	// GivesUp says that Lock may give up by the client's own rule (redsync
	// at its defaults: 32 tries): the benchmark counts it and asks again,
	// and the wait counts from the first ask. Any other error fails the
	// run.
	GivesUp bool
	// Recipes lists the recipe workloads (R1, S1, E1) it runs, where its
	// client offers them (a padlock client whose backend lacks one is n/a);
	// OnlyRecipes keeps it off the mutex workloads (a peer's read-write
	// lock or election).
	Recipes     []string
	OnlyRecipes bool
	// New opens one client (its own connections) whose round trips rt
	// counts. prefix starts every key it writes.
	New func(ctx context.Context, rt *Counter, prefix string) (Client, error)
}

// Client is one benchmark client of an Impl: a process's worth of
// connections.
type Client interface {
	// Lock takes name, waiting if Impl.Waits, and returns its release.
	Lock(ctx context.Context, name string) (Held, error)
	// Close releases the client's connections and sessions.
	Close() error
}

// Held is one acquisition.
type Held struct {
	// Token is the fencing token, if the Impl has them.
	Token uint64
	// Release gives the lock back.
	Release func(ctx context.Context) error
}

// Group is one backend under test: its implementations on the same
// servers.
type Group struct {
	// Backend names it ("etcd", "redis", "zookeeper", "postgres", ...).
	Backend string
	// URL is where its servers are (credentials redacted).
	URL   string
	Impls []Impl
	// Leftover counts what a run left under prefix on the servers (keys,
	// nodes, rows) and deletes it: the state reset between phases.
	Leftover func(ctx context.Context, prefix string) (int, error)
	// Servers are the addresses of the server processes, for their CPU
	// time when they run on this machine.
	Servers []string
	// Close closes the group's admin connections.
	Close func() error
}

// Impl returns the group's implementation called name.
func (g *Group) Impl(name string) (Impl, bool) {
	for _, im := range g.Impls {
		if im.Name == name {
			return im, true
		}
	}
	return Impl{}, false
}

// funcClient is a Client made of functions.
type funcClient struct {
	lock  func(ctx context.Context, name string) (Held, error)
	close func() error
}

func (c funcClient) Lock(ctx context.Context, name string) (Held, error) { return c.lock(ctx, name) }
func (c funcClient) Close() error                                        { return c.close() }

// noRelease is the release of the round-trip floor.
func noRelease(context.Context) error { return nil }

// errBusy is a floor's answer when the name is taken: floors do not wait.
func errBusy(name string) error {
	return fmt.Errorf("bench: %q is taken (a floor does not wait)", name)
}

// second bounds one admin request.
const second = time.Second
