package faults

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/padlock-go/padlock/padlocktest"
)

// partitionLeader: with a holder inside, cut the etcd leader off from its
// peers for three TTLs (the holder stays inside meanwhile, unless another
// client is granted the lock first), then heal, and wait until the
// cluster has one leader again.
func partitionLeader(ctx context.Context, c *cell) error {
	leader, others, err := c.etcdLeader(ctx)
	if err != nil {
		return err
	}
	w, tok, from, err := c.inside(ctx)
	if err != nil {
		return err
	}
	cut := func(context.Context) (func() error, error) {
		return c.srv.Partition([]*padlocktest.Node{leader}, others)
	}
	err = c.pathFault(ctx, "leader-partition", w, tok, true, cut, func(bctx context.Context) error {
		bctx, cancel := context.WithTimeout(bctx, 3*c.b.TTL)
		defer cancel()
		c.grantedOther(bctx, from, w.client) // either way: the check decides
		return nil
	})
	if err != nil {
		return err
	}
	bctx, cancel := context.WithTimeout(ctx, c.bound())
	defer cancel()
	if err := waitUntil(bctx, func() bool { _, _, err := c.etcdLeader(bctx); return err == nil }); err != nil {
		return fmt.Errorf("no single leader after the partition healed: %w", err)
	}
	return nil
}

// etcdLeader asks every member who leads, and returns the leader and the
// others once all agree.
func (c *cell) etcdLeader(ctx context.Context) (leader *padlocktest.Node, others []*padlocktest.Node, err error) {
	var id uint64
	for _, n := range c.srv.Nodes() {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{n.Addr}, DialTimeout: 5 * time.Second})
		if err != nil {
			return nil, nil, err
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := cli.Status(sctx, n.Addr)
		cancel()
		cli.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("status of %s: %w", n.Addr, err)
		}
		switch {
		case st.Leader == 0 || id != 0 && st.Leader != id:
			return nil, nil, fmt.Errorf("members disagree on the leader")
		case st.Header.MemberId == st.Leader:
			leader = n
		default:
			others = append(others, n)
		}
		id = st.Leader
	}
	if leader == nil {
		return nil, nil, fmt.Errorf("no member says it leads")
	}
	return leader, others, nil
}
