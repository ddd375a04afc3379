package padlocktest_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/padlock-go/padlock/padlocktest"
)

// An etcd cluster on test hosts of its own: its leader cut off from its
// peers cannot commit, while the other two elect a leader and go on; the
// test reaches both sides; healed, the old leader catches up.
func TestPartition(t *testing.T) {
	if os.Geteuid() != 0 && !padlocktest.RequireServers() {
		t.Skip("network namespaces need root")
	}
	ctx := testCtx(t, 3*time.Minute)
	srv := padlocktest.Start(t, padlocktest.Etcd, padlocktest.Nodes(3), padlocktest.Partitions())
	client := func(n *padlocktest.Node) *clientv3.Client {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{n.Addr}, DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	var leader *padlocktest.Node
	var others []*padlocktest.Node
	clients := map[*padlocktest.Node]*clientv3.Client{}
	for _, n := range srv.Nodes() {
		clients[n] = client(n)
	}
	padlocktest.WaitFor(t, "a leader", time.Minute, func() bool {
		leader, others = nil, nil
		for _, n := range srv.Nodes() {
			st, err := clients[n].Status(ctx, n.Addr)
			if err != nil {
				return false
			}
			if st.Header.MemberId == st.Leader {
				leader = n
			} else {
				others = append(others, n)
			}
		}
		return leader != nil && len(others) == 2
	})
	heal, err := srv.Partition([]*padlocktest.Node{leader}, others)
	if err != nil {
		t.Fatal(err)
	}
	// The majority side elects a leader and commits.
	padlocktest.WaitFor(t, "a write on the majority side", time.Minute, func() bool {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := clients[others[0]].Put(wctx, "k", "majority")
		return err == nil
	})
	// The minority side cannot: its write never commits.
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, err = clients[leader].Put(wctx, "k", "minority")
	cancel()
	if err == nil {
		t.Fatal("the cut-off leader committed a write")
	}
	if err := heal(); err != nil {
		t.Fatal(err)
	}
	padlocktest.WaitFor(t, "the old leader to catch up", time.Minute, func() bool {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		r, err := clients[leader].Get(rctx, "k")
		return err == nil && len(r.Kvs) == 1 && string(r.Kvs[0].Value) == "majority"
	})

	plain := padlocktest.Start(t, padlocktest.Redis)
	if _, err := plain.Partition(plain.Nodes()); !errors.Is(err, padlocktest.ErrUnsupported) {
		t.Errorf("Partition without Partitions: %v, want ErrUnsupported", err)
	}
}

// A ZooKeeper ensemble on test hosts of its own: its leader cut off from
// its peers stops serving, the other two elect a leader; healed, all serve.
func TestPartitionZooKeeper(t *testing.T) {
	if os.Geteuid() != 0 && !padlocktest.RequireServers() {
		t.Skip("network namespaces need root")
	}
	ctx := testCtx(t, 3*time.Minute)
	srv := padlocktest.Start(t, padlocktest.ZooKeeper, padlocktest.Nodes(3), padlocktest.Partitions())
	mode := func(n *padlocktest.Node) string {
		m, _ := padlocktest.ZooKeeperMode(ctx, n.Addr)
		return m
	}
	var leader *padlocktest.Node
	var others []*padlocktest.Node
	padlocktest.WaitFor(t, "a leader", time.Minute, func() bool {
		leader, others = nil, nil
		for _, n := range srv.Nodes() {
			if mode(n) == "leader" {
				leader = n
			} else {
				others = append(others, n)
			}
		}
		return leader != nil
	})
	heal, err := srv.Partition([]*padlocktest.Node{leader}, others)
	if err != nil {
		t.Fatal(err)
	}
	padlocktest.WaitFor(t, "a new leader on the majority side, the old one not serving", time.Minute, func() bool {
		return (mode(others[0]) == "leader" || mode(others[1]) == "leader") && mode(leader) == ""
	})
	if err := heal(); err != nil {
		t.Fatal(err)
	}
	padlocktest.WaitFor(t, "every server serving again", time.Minute, func() bool {
		return mode(leader) != "" && mode(others[0]) != "" && mode(others[1]) != ""
	})
}
