package zookeeper_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/padlocktest"
)

// Every fault the suite knows: a harness that stopped implementing one
// fails to compile here, and the suite fails a subtest whose fault is
// missing and not declared.
var (
	_ conformance.Cutter       = (*harness)(nil)
	_ conformance.Killer       = (*harness)(nil)
	_ conformance.Restarter    = (*harness)(nil)
	_ conformance.Blackholer   = (*harness)(nil)
	_ conformance.Stopper      = (*harness)(nil)
	_ conformance.SilentOpener = (*harness)(nil)
	_ conformance.Failoverer   = (*harness)(nil)
	_ conformance.Limited      = (*harness)(nil)
)

// OpenSilent opens a Locker whose every server address is a silent
// endpoint (padlocktest.Silent): no session can be made.
func (h *harness) OpenSilent(ctx context.Context, opts ...padlock.OpenOption) (*padlock.Locker, error) {
	p, err := padlocktest.Silent(len(h.ens.Nodes()))
	if err != nil {
		return nil, err
	}
	u := "zk://" + p.Addr() + h.root
	if h.query != "" {
		u += "?" + h.query
	}
	l, err := padlock.Open(ctx, u, opts...)
	if err != nil {
		p.Close()
		return nil, err
	}
	h.mu.Lock()
	h.proxies[l] = []*padlocktest.Proxy{p}
	h.mu.Unlock()
	return l, nil
}

// Unsupported: a standalone server cannot fail over.
func (h *harness) Unsupported() map[conformance.Feature]string {
	if len(h.ens.Nodes()) > 1 {
		return nil
	}
	return map[conformance.Feature]string{
		conformance.FeatureFailover: "a standalone server; TestConformanceEnsemble fails its three-server ensemble's leader over",
	}
}

// Failover kills the ensemble's leader, waits until the others elected a
// new one, then starts the old leader again and waits until it follows.
func (h *harness) Failover(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	nodes := h.ens.Nodes()
	if len(nodes) < 3 {
		return fmt.Errorf("%w: %d servers cannot fail over", errors.ErrUnsupported, len(nodes))
	}
	leader := -1
	for i, z := range nodes {
		if m, err := padlocktest.ZooKeeperMode(ctx, z.Addr); err == nil && m == "leader" {
			leader = i
		}
	}
	if leader < 0 {
		return errors.New("no server says it leads")
	}
	if err := nodes[leader].Kill(); err != nil {
		return err
	}
	serving := func(skip int) error {
		return waitUntil(ctx, func() bool {
			leaders, followers := 0, 0
			for i, z := range nodes {
				if i == skip {
					continue
				}
				switch m, _ := padlocktest.ZooKeeperMode(ctx, z.Addr); strings.TrimSpace(m) {
				case "leader":
					leaders++
				case "follower":
					followers++
				}
			}
			want := len(nodes) - 1
			if skip < 0 {
				want = len(nodes)
			}
			return leaders == 1 && leaders+followers == want
		})
	}
	if err := serving(leader); err != nil {
		return fmt.Errorf("no new leader after killing %s: %w", nodes[leader].Addr, err)
	}
	if err := nodes[leader].Start(ctx); err != nil {
		return err
	}
	if err := serving(-1); err != nil {
		return fmt.Errorf("%s did not rejoin: %w", nodes[leader].Addr, err)
	}
	return nil
}

// waitUntil polls ok until it holds, or ctx ends.
func waitUntil(ctx context.Context, ok func() bool) error {
	for !ok() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond): // polling a condition, bounded by ctx
		}
	}
	return nil
}
