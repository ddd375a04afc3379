package mysqlpg_test

import "github.com/padlock-go/padlock/conformance"

// Every fault the suite knows: a harness that stopped implementing one
// fails to compile here, and the suite fails a subtest whose fault is
// missing and not declared.
var (
	_ conformance.Cutter      = (*harness)(nil)
	_ conformance.Killer      = (*harness)(nil)
	_ conformance.Restarter   = (*harness)(nil)
	_ conformance.Blackholer  = (*harness)(nil)
	_ conformance.Stopper     = (*harness)(nil)
	_ conformance.WaitWitness = (*harness)(nil)
)
