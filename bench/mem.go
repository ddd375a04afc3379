package bench

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/memory"
)

// memClients numbers the mem:// clients of the process.
var memClients atomic.Int64

// memGroup benchmarks padlock's in-process backend (mem://STORE): no
// server, no round trips, so it measures padlock's own bookkeeping, and
// lets the benchmark's tests run every workload without one. Each client
// is a Locker of its own on the store; Cut is memory.Cut.
func memGroup(u *url.URL) (*Group, error) {
	store := u.Host
	if store == "" || strings.Trim(u.Path, "/") != "" {
		return nil, fmt.Errorf("%w: mem:// takes a store name as host and no path", padlock.ErrInvalidURL)
	}
	g := &Group{Backend: "mem", URL: "mem://" + store, Close: func() error { return nil }}
	g.Impls = []Impl{{Name: "padlock", Role: RolePadlock, Waits: true, Tokens: true, Recipes: allRecipes,
		New: func(ctx context.Context, _ *Counter, prefix string) (Client, error) {
			id := fmt.Sprintf("bench-%d", memClients.Add(1))
			l, err := padlock.Open(ctx, "mem://"+store+"?client="+id)
			if err != nil {
				return nil, err
			}
			c := padlockClient(l, func() error { memory.Cut(store, id, false); return nil })
			c.prefix, c.cut = prefix, func() { memory.Cut(store, id, true) }
			return c, nil
		}}}
	g.Leftover = func(ctx context.Context, prefix string) (int, error) {
		n := 0
		for _, k := range memory.Keys(store) {
			if strings.HasPrefix(k, prefix) {
				n++
			}
		}
		return n, nil
	}
	return g, nil
}
