package padlocktest

import (
	"context"
	"errors"
	"os"
	"time"
)

// Node is a server process of some kind: a type that embeds *process.
type node interface {
	proc() *process
}

// Group is a set of server processes of one kind (etcd members, Redis
// masters) in one temporary directory. Close kills them all and removes
// the directory, so a start that fails half-way leaves nothing behind.
type group[N node] struct {
	Nodes []N
	dir   string
}

// newGroup makes the group's temporary directory.
func newGroup[N node](pattern string) (*group[N], error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return nil, err
	}
	return &group[N]{dir: dir}, nil
}

// Dir is the group's temporary directory.
func (g *group[N]) Dir() string { return g.dir }

// startAll starts every node at once (members of a new cluster become
// ready together) and returns the first error.
func (g *group[N]) startAll(ctx context.Context) error {
	errs := make(chan error, len(g.Nodes))
	for _, n := range g.Nodes {
		go func() { errs <- n.proc().Start(ctx) }()
	}
	var all []error
	for range g.Nodes {
		if err := <-errs; err != nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}

// attemptTimeout bounds one attempt at starting a group.
const attemptTimeout = 90 * time.Second

// retryStart starts a group up to three times. Ports come from FreePort,
// and another process (a client's outgoing connection, a parallel test
// package) can take one between the check and the server's bind; a server
// that cannot bind fails or never becomes ready, and the next attempt picks
// new ports. A missing binary is not retried.
func retryStart[G any](ctx context.Context, start func(ctx context.Context) (G, error)) (G, error) {
	var (
		g    G
		errs []error
	)
	for range 3 {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		var err error
		g, err = start(actx)
		cancel()
		if err == nil || errors.Is(err, ErrMissing) {
			return g, err
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return g, errors.Join(errs...)
}

// Close kills every node and removes the directory.
func (g *group[N]) Close() {
	for _, n := range g.Nodes {
		n.proc().Kill()
		if c := n.proc().clock; c != nil {
			c.close()
		}
	}
	os.RemoveAll(g.dir)
}
