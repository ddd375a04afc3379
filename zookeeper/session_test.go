package zookeeper

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

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

// Waiting for a closed session's goroutines ends with ctx, and says what
// is left, when they never end (go-zookeeper/zk#163 wedges its loop); it
// returns at once, with no error, when they have ended.
func TestSessionWaitBounded(t *testing.T) {
	wedged := &session{id: 0x1234, exited: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := wedged.wait(ctx)
	if err == nil || !strings.Contains(err.Error(), "still running") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("wait on goroutines that never end: %v, want a report of them ending with ctx", err)
	}
	ended := &session{exited: make(chan struct{}), proverDone: make(chan struct{})}
	close(ended.exited)
	close(ended.proverDone)
	if err := ended.wait(ctx); err != nil {
		t.Errorf("wait on ended goroutines: %v, want nil", err)
	}
}

// A reconnect ends the session only when it voids the holds' grants:
// another session id (this one expired), or a shorter timeout than the
// one their leases count on. A longer timeout (a server with another
// minimum granted more) keeps the session and its holds.
func TestReconnectVoidsOnlyShorterTerms(t *testing.T) {
	s := &session{id: 0x1234, ttl: 10 * time.Second}
	for _, c := range []struct {
		id      int64
		granted time.Duration
		want    bool
	}{
		{0x1234, 10 * time.Second, false},
		{0x1234, 20 * time.Second, false},
		{0x1234, 9999 * time.Millisecond, true},
		{0x5678, 10 * time.Second, true},
		{0x5678, 20 * time.Second, true},
	} {
		if got := s.voidedBy(c.id, c.granted); got != c.want {
			t.Errorf("session %#x with a %v timeout, reconnected as %#x with %v: voided %v, want %v", s.id, s.ttl, c.id, c.granted, got, c.want)
		}
	}
}
