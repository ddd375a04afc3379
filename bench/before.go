package bench

import (
	"context"
	"net"

	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Padlock at an earlier revision, beside the current one, in one run.
// scripts/bench-u1 builds the command with u1before.go.in copied in as a
// Go file (tag u1before), which links that revision in under another
// module path and sets these hooks; it is not a Go file in the checkout,
// where that module does not exist (go mod tidy would look for it). Each backend's group then adds a twin of each padlock
// implementation, named with BeforeSuffix and opened in the same way, so
// that one run measures both, turn by turn on the same servers (WriteU1).
// In any other build the hooks are nil and no twin runs.
var (
	// beforeEtcd opens the earlier padlock over cli (etcd.New), closing
	// cli when its Client closes.
	beforeEtcd func(ctx context.Context, cli *clientv3.Client, prefix string) (Client, error)
	// beforeRedis opens the earlier padlock over cli (redis.New), closing
	// cli when its Client closes.
	beforeRedis func(ctx context.Context, cli goredis.UniversalClient, prefix string, fair bool) (Client, error)
	// beforeOpen opens the earlier padlock from a URL (padlock.Open with
	// dial as its dialer); prefix starts every name it locks.
	beforeOpen func(ctx context.Context, url string, dial func(ctx context.Context, network, addr string) (net.Conn, error), prefix string) (Client, error)
)

// beforeRecipes are the recipe workloads the twins run: none, unless
// scripts/bench-u1 links in the earlier padlock's readers and permits
// (bench/u1before_rw.go.in, for R1 and S1).
var beforeRecipes []string

// BeforeSuffix ends the name of an implementation that runs padlock at the
// earlier revision ("padlock@before").
const BeforeSuffix = "@before"

// withBefore returns impls and, if the earlier padlock is linked in, the
// twin of each padlock implementation in impls: twin(name) builds it, or
// returns false where the earlier padlock has no such implementation.
func withBefore(impls []Impl, twin func(im Impl) (func(ctx context.Context, rt *Counter, prefix string) (Client, error), bool)) []Impl {
	var twins []Impl
	for _, im := range impls {
		if im.Role != RolePadlock {
			continue
		}
		if open, ok := twin(im); ok {
			t := im
			t.Name, t.Recipes, t.New = im.Name+BeforeSuffix, nil, open
			for _, w := range im.Recipes {
				if contains(beforeRecipes, w) {
					t.Recipes = append(t.Recipes, w)
				}
			}
			twins = append(twins, t)
		}
	}
	return append(impls, twins...)
}
