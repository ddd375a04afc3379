package memory_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

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
	}, conformance.Subtests("Tokens", "TryLockHeld"))
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
		}, conformance.Subtests("MutualExclusoin"))
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
