package padlocktest

import (
	"testing"
	"time"
)

// WaitFor polls cond until it holds, failing t after within: a condition,
// never a sleep standing in for one. For server state seen through a
// conformance.Harness, conformance.WaitState does the same.
func WaitFor(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
