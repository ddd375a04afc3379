package padlocktest

import (
	"context"
	"testing"
	"time"

	"github.com/padlock-go/padlock/conformance"
)

// WaitFor polls cond until it holds, failing t after within: a condition,
// never a sleep standing in for one. It is conformance.WaitFor without a
// context; for server state seen through a conformance.Harness,
// conformance.WaitState does the same.
func WaitFor(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	conformance.WaitFor(context.Background(), t, what, within, cond)
}
