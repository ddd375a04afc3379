package padlocktest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/padlock-go/padlock/padlocktest"
)

// An etcd cluster changes its membership: a member added serves and
// replicates, a member removed stops, and the cluster goes on throughout.
func TestMembership(t *testing.T) {
	ctx := testCtx(t, 3*time.Minute)
	srv := padlocktest.Start(t, padlocktest.Etcd, padlocktest.Nodes(3))
	first := srv.Nodes()[0]
	added, err := srv.AddNode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(srv.Nodes()) != 4 {
		t.Fatalf("%d nodes after AddNode, want 4", len(srv.Nodes()))
	}
	put := func(n *padlocktest.Node, v string) {
		t.Helper()
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{n.Addr}, DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		padlocktest.WaitFor(t, "a write through "+n.Addr, time.Minute, func() bool {
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err := c.Put(wctx, "k", v)
			return err == nil
		})
		r, err := c.Get(ctx, "k")
		if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != v {
			t.Fatalf("read back through %s: %v, %v", n.Addr, r, err)
		}
	}
	put(added, "through the added member")
	if err := srv.RemoveNode(ctx, first); err != nil {
		t.Fatal(err)
	}
	if len(srv.Nodes()) != 3 || first.Running() {
		t.Fatalf("after RemoveNode: %d nodes, removed one running: %v", len(srv.Nodes()), first.Running())
	}
	put(srv.Nodes()[0], "after the removal")
	if err := srv.RemoveNode(ctx, first); !errors.Is(err, padlocktest.ErrInvalid) {
		t.Errorf("removing a removed node: %v, want ErrInvalid", err)
	}

	plain := padlocktest.Start(t, padlocktest.Redis)
	if _, err := plain.AddNode(ctx); !errors.Is(err, padlocktest.ErrUnsupported) {
		t.Errorf("AddNode on Redis: %v, want ErrUnsupported", err)
	}
}
