package memory_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/padlock-go/padlock/conformance"
)

// conformance.Subtests runs the subtests it names and no other: one
// harness is made per subtest run, so two names make two harnesses, each
// for a subtest of that name.
func TestConformanceSubtests(t *testing.T) {
	var ran []string
	conformance.Run(t, func(t *testing.T) conformance.Harness {
		ran = append(ran, t.Name()[strings.LastIndex(t.Name(), "/")+1:])
		return newHarness("subtests")
	}, conformance.Subtests("Tokens", "TryLockHeld"), conformance.Promises(promised))
	if len(ran) != 2 || ran[0] != "TryLockHeld" || ran[1] != "Tokens" {
		t.Errorf("Subtests(Tokens, TryLockHeld) ran %q, want [TryLockHeld Tokens] (the suite's order)", ran)
	}
}

// A name that is no subtest fails the test that asked for it, rather than
// running nothing: checked in a child process, which runs the helper below.
func TestConformanceSubtestsUnknownName(t *testing.T) {
	if os.Getenv("PADLOCK_SUBTESTS_CHILD") == "1" {
		conformance.Run(t, func(t *testing.T) conformance.Harness {
			t.Error("a harness was made for a run whose only subtest does not exist")
			return newHarness("subtests")
		}, conformance.Subtests("MutualExclusoin"), conformance.Promises(promised))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestConformanceSubtestsUnknownName$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PADLOCK_SUBTESTS_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("a run of a misspelt subtest passed:\n%s", out)
	}
	if !strings.Contains(string(out), `no subtest is called "MutualExclusoin"`) {
		t.Errorf("a run of a misspelt subtest failed without naming it:\n%s", out)
	}
}

// A Locker that reports fewer Capabilities than its configuration promises
// (conformance.Promises) fails the suite, rather than turning the checks of
// what it no longer promises off; and Run without Promises fails. Both
// checked in a child process, which runs the helper below.
func TestConformancePromisesPinned(t *testing.T) {
	switch os.Getenv("PADLOCK_PROMISES_CHILD") {
	case "fewer":
		fewer := promised
		fewer.MonotonicTokens = false // mem:// reports it: the check must fail
		conformance.Run(t, func(t *testing.T) conformance.Harness { return newHarness("promises") },
			conformance.Subtests("Tokens"), conformance.Promises(fewer))
		return
	case "none":
		conformance.Run(t, func(t *testing.T) conformance.Harness { return newHarness("promises") },
			conformance.Subtests("Tokens"))
		return
	}
	for child, want := range map[string]string{
		"fewer": "want {Consistency:CP FairFIFO:true MonotonicTokens:false",
		"none":  "Run needs the configuration's promises",
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestConformancePromisesPinned$", "-test.count=1")
		cmd.Env = append(os.Environ(), "PADLOCK_PROMISES_CHILD="+child)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("%s: the run passed:\n%s", child, out)
		} else if !strings.Contains(string(out), want) {
			t.Errorf("%s: the run failed without saying %q:\n%s", child, want, out)
		}
	}
}

// lingering is a harness whose server state keeps one entry for five
// leases after it is made, as a release that did nothing would leave a
// hold for its lease to remove.
type lingering struct {
	*harness
	until time.Time
}

func (h *lingering) State(ctx context.Context) ([]string, error) {
	s, err := h.harness.State(ctx)
	if time.Now().Before(h.until) {
		s = append(s, "left for its lease to remove")
	}
	return s, err
}

// A subtest that injected no fault must leave nothing behind once its
// Lockers closed, not merely nothing once their leases ran out: state
// still there half a lease after Close fails it (checked in a child
// process, which runs the helper below).
func TestConformanceLeftoversWithoutAFault(t *testing.T) {
	if os.Getenv("PADLOCK_LEFTOVERS_CHILD") == "1" {
		conformance.Run(t, func(t *testing.T) conformance.Harness {
			h := newHarness("leftovers")
			return &lingering{harness: h, until: time.Now().Add(5 * h.TTL())}
		}, conformance.Subtests("Tokens"), conformance.Promises(promised))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestConformanceLeftoversWithoutAFault$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PADLOCK_LEFTOVERS_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("a subtest whose state outlived Close passed:\n%s", out)
	}
	if !strings.Contains(string(out), "with no fault injected") {
		t.Errorf("the subtest failed without saying that its state outlived Close:\n%s", out)
	}
}
