package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/padlock-go/padlock/padlocktest"
)

// LocalKinds are the servers Local starts by default: every backend.
var LocalKinds = []padlocktest.Kind{padlocktest.Etcd, padlocktest.Redis, padlocktest.RedisCluster, padlocktest.RedLock,
	padlocktest.ZooKeeper, padlocktest.Postgres, padlocktest.MySQL}

// ExtraKinds are servers Local starts when asked: a Sentinel-managed Redis
// primary runs the same commands as a single server (only the client
// finds the primary through Sentinel), so it is not in the default run.
var ExtraKinds = []padlocktest.Kind{padlocktest.RedisSentinel}

// Local starts servers of kinds on loopback ports in temporary
// directories, as padlock's tests do, and opens a group on each. close
// closes the groups and stops the servers.
func Local(ctx context.Context, kinds []padlocktest.Kind) (groups []*Group, close func(), err error) {
	var servers []*padlocktest.Server
	close = func() {
		for _, g := range groups {
			g.Close()
		}
		for _, s := range servers {
			s.Close()
		}
	}
	for _, k := range kinds {
		s, err := padlocktest.New(ctx, k)
		if err != nil {
			close()
			return nil, nil, fmt.Errorf("bench: start %s: %w", k, err)
		}
		servers = append(servers, s)
		g, err := Open(ctx, s.URL())
		if err != nil {
			close()
			return nil, nil, errors.Join(fmt.Errorf("bench: %s", k), err)
		}
		groups = append(groups, g)
	}
	return groups, close, nil
}
