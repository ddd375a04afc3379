package etcd_test

import (
	"context"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/padlocktest"
)

// The harness's faults and the backend's optional parts, checked where
// the suite needs them: a harness that stopped implementing one fails.
var (
	_ conformance.Cutter       = (*harness)(nil)
	_ conformance.Killer       = (*harness)(nil)
	_ conformance.Restarter    = (*harness)(nil)
	_ conformance.Blackholer   = (*harness)(nil)
	_ conformance.Stopper      = (*harness)(nil)
	_ conformance.SilentOpener = (*harness)(nil)
	_ conformance.Limited      = (*harness)(nil)
)

// OpenSilent opens a Locker on a silent endpoint (padlocktest.Silent),
// which Open must give up on.
func (h *harness) OpenSilent(ctx context.Context, opts ...padlock.OpenOption) (*padlock.Locker, error) {
	p, err := padlocktest.Silent(1)
	if err != nil {
		return nil, err
	}
	l, err := padlock.Open(ctx, h.url(p.Addr(), h.prefix), opts...)
	if err != nil {
		p.Close()
		return nil, err
	}
	h.mu.Lock()
	h.proxy[l] = p
	h.mu.Unlock()
	return l, nil
}

// Unsupported: the suite's server is one member, which cannot fail over.
func (h *harness) Unsupported() map[conformance.Feature]string {
	return map[conformance.Feature]string{
		conformance.FeatureFailover: "one member; TestLeaderFailover kills a three-member cluster's leader under load and checks that tokens keep rising",
	}
}
