package redis_test

import (
	"context"
	"fmt"
	"net"

	"github.com/padlock-go/padlock/conformance"
)

// Every fault the suite knows, on both harnesses: one that stopped
// implementing one fails to compile here, and the suite fails a subtest
// whose fault is missing at run time.
var (
	_ conformance.Cutter     = (*harness)(nil)
	_ conformance.Killer     = (*harness)(nil)
	_ conformance.Restarter  = (*harness)(nil)
	_ conformance.Blackholer = (*harness)(nil)
	_ conformance.Stopper    = (*harness)(nil)

	_ conformance.Cutter     = (*tlsHarness)(nil)
	_ conformance.Killer     = (*tlsHarness)(nil)
	_ conformance.Restarter  = (*tlsHarness)(nil)
	_ conformance.Blackholer = (*tlsHarness)(nil)
	_ conformance.Stopper    = (*tlsHarness)(nil)
)

// viaDialer dials each address in via's keys at its value instead (a
// client's own proxy for each node), and refuses any other.
func viaDialer(via map[string]string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		to, ok := via[addr]
		if !ok {
			return nil, fmt.Errorf("no proxy for %s", addr)
		}
		return d.DialContext(ctx, network, to)
	}
}
