package etcd_test

import "github.com/padlock-go/padlock/conformance"

// Every fault the suite knows: a harness that stopped implementing one
// fails to compile here, and the suite fails a subtest whose fault is
// missing and not declared.
var (
	_ conformance.Cutter     = (*harness)(nil)
	_ conformance.Killer     = (*harness)(nil)
	_ conformance.Restarter  = (*harness)(nil)
	_ conformance.Blackholer = (*harness)(nil)
	_ conformance.Stopper    = (*harness)(nil)
	_ conformance.Limited    = (*harness)(nil)
)

// Unsupported: the suite's server is one member, which cannot fail over.
func (h *harness) Unsupported() map[conformance.Feature]string {
	return map[conformance.Feature]string{
		conformance.FeatureFailover: "one member; TestLeaderFailover kills a three-member cluster's leader under load and checks that tokens keep rising",
	}
}
