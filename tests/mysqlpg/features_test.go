package mysqlpg_test

import (
	"context"

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
	_ conformance.WaitWitness  = (*harness)(nil)
)

// OpenSilent opens a Locker on a silent endpoint (padlocktest.Silent):
// the database's handshake never comes.
func (h *harness) OpenSilent(ctx context.Context, opts ...padlock.OpenOption) (*padlock.Locker, error) {
	p, err := padlocktest.Silent(1)
	if err != nil {
		return nil, err
	}
	l, err := padlock.Open(ctx, h.url(p.Addr(), nil), opts...)
	if err != nil {
		p.Close()
		return nil, err
	}
	h.mu.Lock()
	h.proxies[l] = p
	h.mu.Unlock()
	return l, nil
}
