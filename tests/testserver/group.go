package testserver

import (
	"context"
	"errors"
	"os"
)

// Node is a server process of some kind: a type that embeds *Process.
type Node interface {
	process() *Process
}

// Group is a set of server processes of one kind (etcd members, Redis
// masters) in one temporary directory. Close kills them all and removes
// the directory, so a start that fails half-way leaves nothing behind.
type Group[N Node] struct {
	Nodes []N
	dir   string
}

// newGroup makes the group's temporary directory.
func newGroup[N Node](pattern string) (*Group[N], error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return nil, err
	}
	return &Group[N]{dir: dir}, nil
}

// Dir is the group's temporary directory.
func (g *Group[N]) Dir() string { return g.dir }

// startAll starts every node at once (members of a new cluster become
// ready together) and returns the first error.
func (g *Group[N]) startAll(ctx context.Context) error {
	errs := make(chan error, len(g.Nodes))
	for _, n := range g.Nodes {
		go func() { errs <- n.process().Start(ctx) }()
	}
	var all []error
	for range g.Nodes {
		if err := <-errs; err != nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}

// Close kills every node and removes the directory.
func (g *Group[N]) Close() {
	for _, n := range g.Nodes {
		n.process().Kill()
	}
	os.RemoveAll(g.dir)
}
