package backends_test

import (
	"testing"
	"time"

	"github.com/padlock-go/padlock/backends"
)

func TestGrantDeadline(t *testing.T) {
	sent := time.Unix(1000, 0)
	for _, c := range []struct{ ttl, before time.Duration }{
		{backends.MinTTL, 60 * time.Millisecond},   // 200ms/20 + 50ms
		{10 * time.Second, 550 * time.Millisecond}, // 10s/20 + 50ms
		{time.Minute, 3*time.Second + 50*time.Millisecond},
	} {
		g := backends.Grant{Sent: sent, TTL: c.ttl}
		if got := g.Expiry().Sub(g.Deadline()); got != c.before || got != backends.SafetyMargin(c.ttl) {
			t.Errorf("TTL %v: Deadline is %v before Expiry, want %v (SafetyMargin %v)", c.ttl, got, c.before, backends.SafetyMargin(c.ttl))
		}
		if !g.Deadline().After(sent) {
			t.Errorf("TTL %v: Deadline %v is not after Sent", c.ttl, g.Deadline())
		}
	}
}
