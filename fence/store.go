package fence

import (
	"context"
	"sync"
)

// Store keeps the highest token seen per resource. The HTTP middleware
// keeps its tokens in one; Memory is in-process, Table.Store keeps them in
// SQL, and StoreFunc turns any helper of this package (Redis, Etcd,
// ZooKeeper) into one.
type Store interface {
	// Record records token for resource if it is at least the highest
	// token seen for resource, and otherwise returns a *StaleError
	// (errors.Is ErrStale). Equal tokens are accepted: one holder may
	// write many times. Invalid arguments return ErrInvalid.
	Record(ctx context.Context, resource string, token uint64) error
}

// StoreFunc is a function that is a Store, for example
//
//	fence.StoreFunc(func(ctx context.Context, r string, t uint64) error {
//		return fence.Redis(ctx, rdb, r, t) // no writes: check and record
//	})
type StoreFunc func(ctx context.Context, resource string, token uint64) error

// Record calls f.
func (f StoreFunc) Record(ctx context.Context, resource string, token uint64) error {
	return f(ctx, resource, token)
}

// Memory is a Store in this process's memory, safe for concurrent use:
// a map from resource to the highest token seen, which grows by one entry
// per resource and is lost when the process ends. The zero value is ready.
type Memory struct {
	mu      sync.Mutex
	highest map[string]uint64
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{} }

// Record implements Store.
func (m *Memory) Record(ctx context.Context, resource string, token uint64) error {
	if err := check(resource, token); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.highest[resource]; token < h {
		return stale(resource, token, h)
	}
	if m.highest == nil {
		m.highest = map[string]uint64{}
	}
	m.highest[resource] = token
	return nil
}

// Highest returns the highest token recorded for resource, 0 if none.
func (m *Memory) Highest(resource string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.highest[resource]
}
