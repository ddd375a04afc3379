package padlocktest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/padlock-go/padlock/conformance"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// admin returns an etcd client of the cluster's running members.
func (c *etcdCluster) admin(except *etcdMember) (*clientv3.Client, error) {
	var eps []string
	for _, m := range c.Nodes {
		if m != except && m.Running() {
			eps = append(eps, m.ClientAddr)
		}
	}
	return clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// addMember adds a member to the running cluster (MemberAdd, then a new
// process that joins it) and returns it once it serves clients.
func (c *etcdCluster) addMember(ctx context.Context) (*etcdMember, error) {
	if c.lab != nil || c.opts.TLS != nil || c.opts.AuthTokenTTL > 0 {
		return nil, fmt.Errorf("%w: AddNode with Partitions, TLS or auth", ErrUnsupported)
	}
	cp, err := FreePort()
	if err != nil {
		return nil, err
	}
	pp, err := FreePort()
	if err != nil {
		return nil, err
	}
	c.added++
	name := fmt.Sprintf("a%d", c.added)
	peer := fmt.Sprintf("http://127.0.0.1:%d", pp)
	cli, err := c.admin(nil)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	// etcd refuses a change until every member has been connected for
	// five seconds (strict reconfiguration check): a cluster that has
	// just started, or changed, answers "unhealthy cluster" until then.
	var resp *clientv3.MemberAddResponse
	if perr := conformance.Poll(ctx, 200*time.Millisecond, func() bool {
		resp, err = cli.MemberAdd(ctx, []string{peer})
		return !errors.Is(err, rpctypes.ErrUnhealthy)
	}); perr != nil {
		return nil, fmt.Errorf("etcd MemberAdd %s: %w (%w)", peer, err, perr)
	}
	if err != nil {
		// The change may have been made although its answer was lost.
		c.forget(cli, peer)
		return nil, fmt.Errorf("etcd MemberAdd %s: %w", peer, err)
	}
	var initial []string
	for _, m := range resp.Members {
		n := m.Name
		if m.ID == resp.Member.ID {
			n = name
		}
		for _, u := range m.PeerURLs {
			initial = append(initial, n+"="+u)
		}
	}
	m, err := c.member(-1, name, "127.0.0.1", cp, pp, strings.Join(initial, ","), true)
	if err == nil {
		err = m.Start(ctx)
	}
	if err != nil {
		c.forget(cli, peer)
		return nil, fmt.Errorf("starting the added member %s: %w", name, err)
	}
	c.Nodes = append(c.Nodes, m)
	return m, nil
}

// forget removes the member with peer URL peer, if the cluster has it,
// after an AddNode that failed half-way; bounded, and best effort.
func (c *etcdCluster) forget(cli *clientv3.Client, peer string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		list, err := cli.MemberList(ctx)
		if err == nil {
			var id uint64
			for _, m := range list.Members {
				if slices.Contains(m.PeerURLs, peer) {
					id = m.ID
				}
			}
			if id == 0 {
				return
			}
			if _, err = cli.MemberRemove(ctx, id); err == nil {
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// removeMember removes m from the cluster (MemberRemove) and stops it.
func (c *etcdCluster) removeMember(ctx context.Context, m *etcdMember) error {
	if c.lab != nil {
		// Partition finds a node's host by its place among the nodes.
		return fmt.Errorf("%w: RemoveNode with Partitions", ErrUnsupported)
	}
	cli, err := c.admin(m)
	if err != nil {
		return err
	}
	defer cli.Close()
	list, err := cli.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("etcd MemberList: %w", err)
	}
	var id uint64
	for _, mm := range list.Members {
		if slices.Contains(mm.PeerURLs, m.peerURL) {
			id = mm.ID
		}
	}
	if id == 0 {
		return fmt.Errorf("%w: %s is not a member", ErrInvalid, m.ClientAddr)
	}
	if perr := conformance.Poll(ctx, 200*time.Millisecond, func() bool {
		_, err = cli.MemberRemove(ctx, id)
		return !errors.Is(err, rpctypes.ErrUnhealthy)
	}); perr != nil {
		return fmt.Errorf("etcd MemberRemove %s: %w (%w)", m.ClientAddr, err, perr)
	}
	if err != nil {
		return fmt.Errorf("etcd MemberRemove %s: %w", m.ClientAddr, err)
	}
	m.Kill() // a removed member stops by itself; make sure
	c.Nodes = slices.DeleteFunc(c.Nodes, func(x *etcdMember) bool { return x == m })
	return nil
}

// AddNode adds a member to a running etcd cluster: etcd's MemberAdd, then
// a new member process (on a new loopback port) that joins the cluster. It
// returns once the member serves clients; Nodes and URL include it from
// then on. Not with Partitions, TLS or EtcdAuthTokenTTL; other kinds
// return ErrUnsupported. Not safe to call concurrently with other
// membership changes.
func (s *Server) AddNode(ctx context.Context) (*Node, error) {
	if s.members == nil {
		return nil, fmt.Errorf("%w: AddNode on %s", ErrUnsupported, s.kind)
	}
	m, err := s.members.addMember(ctx)
	if err != nil {
		return nil, err
	}
	n := &Node{Addr: m.ClientAddr, ops: m}
	s.nodes = append(s.nodes, n)
	return n, nil
}

// RemoveNode removes a member from a running etcd cluster (etcd's
// MemberRemove) and stops its process; Nodes and URL leave it out from
// then on. Not with Partitions; other kinds return ErrUnsupported.
func (s *Server) RemoveNode(ctx context.Context, n *Node) error {
	if s.members == nil {
		return fmt.Errorf("%w: RemoveNode on %s", ErrUnsupported, s.kind)
	}
	m, ok := n.ops.(*etcdMember)
	if !ok || !slices.Contains(s.nodes, n) {
		return fmt.Errorf("%w: RemoveNode: not a node of this server", ErrInvalid)
	}
	if err := s.members.removeMember(ctx, m); err != nil {
		return err
	}
	s.nodes = slices.DeleteFunc(s.nodes, func(x *Node) bool { return x == n })
	return nil
}
