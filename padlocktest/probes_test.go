package padlocktest

import (
	"context"
	"testing"
	"time"
)

// The containers provider's readiness checks, which this machine cannot run
// in containers, checked on local servers: each passes on a serving
// server and fails on a killed one.
func TestContainerProbes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, c := range []struct {
		kind  Kind
		ready func(context.Context, string) error
	}{
		{Etcd, etcdHealthy},
		{Redis, redisPong},
		{ZooKeeper, func(ctx context.Context, addr string) error { return (&zkNode{Addr: addr}).serving(ctx) }},
	} {
		t.Run(string(c.kind), func(t *testing.T) {
			srv := Start(t, c.kind, Provider(ProviderLocal))
			n := srv.Nodes()[0]
			if err := c.ready(ctx, n.Addr); err != nil {
				t.Fatalf("a serving %s is not ready: %v", c.kind, err)
			}
			if err := n.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := c.ready(ctx, n.Addr); err == nil {
				t.Fatalf("a killed %s is ready", c.kind)
			}
		})
	}
}
