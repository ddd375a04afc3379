package zookeeper

import (
	"testing"

	"github.com/padlock-go/padlock"
)

// The driver's own session is shared with holds at the default TTL only
// while the two timeouts are equal (sessions.live matches on the
// timeout): the driver keeps its own constant, so that it takes no policy
// from the root package, and this test keeps it in step.
func TestOwnSessionTimeoutIsTheDefaultTTL(t *testing.T) {
	if ownSessionTimeout != padlock.DefaultTTL {
		t.Errorf("ownSessionTimeout = %v, padlock.DefaultTTL = %v: holds at the default TTL no longer share the driver's session", ownSessionTimeout, padlock.DefaultTTL)
	}
}
