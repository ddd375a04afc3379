package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/padlock-go/padlock"
)

// errNA is an implementation that does not offer a recipe workload's
// recipe on its backend (its Capabilities say so, or the peer has none):
// its cell is reported as n/a, with the reason.
var errNA = errors.New("n/a")

// What a Client may offer beyond the mutex, each found by a type
// assertion: the recipe workloads run only the clients that have it.
type (
	// readClient takes the reader side of a name (R1).
	readClient interface {
		RLock(ctx context.Context, name string) (Held, error)
	}
	// limitClient takes one permit of n on a name (S1).
	limitClient interface {
		LockLimit(ctx context.Context, name string, n int) (Held, error)
	}
	// electClient campaigns in the election called name, with a lease of
	// ElectTTL, and observes it (E1).
	electClient interface {
		Campaign(ctx context.Context, name, value string) (Term, error)
		// Observe sends the value of each leader it sees; errNA if the
		// client cannot observe.
		Observe(ctx context.Context, name string) (<-chan Observed, error)
	}
	// supporter says whether the client's backend offers the recipe of
	// workload: nil, or errNA with the reason.
	supporter interface {
		Supports(workload string) error
	}
	// cutter takes the client's server away from it without a word, where
	// its connections do not go through its Counter (mem://).
	cutter interface {
		Cut()
	}
)

// Term is one candidate's term as leader: its Release resigns.
type Term struct {
	Held
	// Proclaim replaces the leader's value; nil if the client cannot.
	Proclaim func(ctx context.Context, value string) error
}

// allRecipes are the recipe workloads padlock runs wherever its backend
// offers them.
var allRecipes = []string{R1, S1, E1}

// lockerClient is a Client over a padlock Locker: the mutex, and every
// recipe the Locker's backend offers. prefix starts every name (for the
// backends whose Locker has no prefix of its own).
type lockerClient struct {
	l         *padlock.Locker
	prefix    string
	closeConn func() error
	cut       func()
}

// padlockClient is a Client over a padlock Locker; closing it closes the
// Locker, then closeConn.
func padlockClient(l *padlock.Locker, closeConn func() error) *lockerClient {
	return &lockerClient{l: l, closeConn: closeConn}
}

func held(lk *padlock.Lock, err error) (Held, error) {
	if err != nil {
		return Held{}, err
	}
	return Held{Token: lk.Token(), Release: lk.Unlock}, nil
}

func (c *lockerClient) Lock(ctx context.Context, name string) (Held, error) {
	return held(c.l.Lock(ctx, c.prefix+name))
}

func (c *lockerClient) RLock(ctx context.Context, name string) (Held, error) {
	return held(c.l.RLock(ctx, c.prefix+name))
}

func (c *lockerClient) LockLimit(ctx context.Context, name string, n int) (Held, error) {
	return held(c.l.Lock(ctx, c.prefix+name, padlock.WithLimit(n)))
}

func (c *lockerClient) Campaign(ctx context.Context, name, value string) (Term, error) {
	ld, err := c.l.Election(c.prefix+name).Campaign(ctx, value, padlock.WithTTL(ElectTTL))
	if err != nil {
		return Term{}, err
	}
	return Term{Held: Held{Token: ld.Token(), Release: ld.Resign}, Proclaim: ld.Proclaim}, nil
}

func (c *lockerClient) Observe(ctx context.Context, name string) (<-chan Observed, error) {
	return observed(ctx, c.l.Election(c.prefix+name).Observe(ctx), func(ld padlock.Leader) string { return ld.Value }), nil
}

func (c *lockerClient) Supports(workload string) error {
	caps := c.l.Capabilities()
	lacks := ""
	switch {
	case workload == R1 && !caps.SharedLocks:
		lacks = "SharedLocks"
	case workload == S1 && !caps.Limits:
		lacks = "Limits"
	case workload == E1 && !caps.Elections:
		lacks = "Elections"
	}
	if lacks != "" {
		return fmt.Errorf("%w: the backend's Capabilities lack %s", errNA, lacks)
	}
	return nil
}

func (c *lockerClient) Cut() {
	if c.cut != nil {
		c.cut()
	}
}

func (c *lockerClient) Close() error {
	err := c.l.Close()
	if c.closeConn != nil {
		if cerr := c.closeConn(); err == nil {
			err = cerr
		}
	}
	return err
}

// mutexClient is the mutex of a recipe's client: every acquisition a
// Lock on the same name, the baseline the recipe must beat. It runs
// where the recipe does.
type mutexClient struct{ c Client }

func (m mutexClient) Lock(ctx context.Context, name string) (Held, error) { return m.c.Lock(ctx, name) }
func (m mutexClient) Close() error                                        { return m.c.Close() }

func (m mutexClient) Supports(workload string) error {
	if s, ok := m.c.(supporter); ok {
		return s.Supports(workload)
	}
	return nil
}

// mutexSuffix names the mutex baseline of an implementation.
const mutexSuffix = "-mutex"

// mutexOf is im's mutex, as the baseline of R1 and S1.
func mutexOf(im Impl) Impl {
	m := im
	m.Name, m.Role, m.Recipes, m.OnlyRecipes = im.Name+mutexSuffix, RoleMutex, []string{R1, S1}, true
	m.New = func(ctx context.Context, rt *Counter, prefix string) (Client, error) {
		c, err := im.New(ctx, rt, prefix)
		if err != nil {
			return nil, err
		}
		return mutexClient{c}, nil
	}
	return m
}

// implsFor lists the implementations of g that run cell: on a mutex
// workload every one that can (floors only where nobody waits); on a
// recipe workload those that offer it, and the mutex of each padlock
// implementation on R1 and S1.
func implsFor(g *Group, cell Load, only []string) []Impl {
	var out []Impl
	keep := func(im Impl) bool { return len(only) == 0 || contains(only, im.Name) }
	for _, im := range g.Impls {
		switch {
		case !recipe(cell.Workload):
			if !im.OnlyRecipes && (im.Waits || !cell.Contended()) && keep(im) {
				out = append(out, im)
			}
		case contains(im.Recipes, cell.Workload):
			if keep(im) {
				out = append(out, im)
			}
			if im.Role == RolePadlock && cell.Workload != E1 {
				if m := mutexOf(im); keep(im) || keep(m) {
					out = append(out, m)
				}
			}
		}
	}
	return out
}

// unwrap is the Client under the benchmark's own wrappers, whose
// optional methods the recipe workloads look for.
func unwrap(c Client) Client {
	if o, ok := c.(*onceClient); ok {
		return o.Client
	}
	return c
}
