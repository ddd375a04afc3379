package faults

import (
	"fmt"
	"strings"

	"github.com/padlock-go/padlock"
)

// Kind is what a worker takes and does inside: the mutex (a writer), or
// one of the recipes built on it (docs/readwrite.md, semaphore.md,
// multilock.md, election.md).
type Kind string

// Worker kinds.
const (
	// Writer takes the lock (Lock), reads the resource and writes it.
	Writer Kind = "writer"
	// Reader takes the read side (RLock), reads the resource and checks
	// its token against the fenced register (read-and-check: it writes
	// nothing).
	Reader Kind = "reader"
	// Permit takes one of a semaphore's permits (Lock WithLimit), and
	// reads and checks as a reader does.
	Permit Kind = "permit"
	// Multi takes two names at once (LockAll), reads both and writes
	// both, each with its own name's token.
	Multi Kind = "multi"
	// Leader campaigns (Election.Campaign) and, while its term lasts (or a
	// term length at most), reads and writes as a writer does, with the
	// term's token; then it resigns.
	Leader Kind = "leader"
)

// writes reports whether a worker of kind k writes the resource (a reader
// or a permit only reads and checks).
func (k Kind) writes() bool { return k != Reader && k != Permit }

// exclusive reports whether a hold of kind k excludes every other hold on
// its names (a reader excludes writers only; a permit, holds beyond the
// limit).
func (k Kind) exclusive() bool { return k.writes() }

// leaderTerm is a leader's longest term, in critical sections' holds: it
// resigns after it, so that terms change hands during a run.
const leaderTerm = 4

// recipeLimit is a semaphore cell's limit n: n+2 permit workers contend.
const recipeLimit = 2

// multiNames are the names a multi cell's workers take, two each: every
// pair overlaps every other, and each worker gives its pair in an order of
// its own (LockAll takes them in one canonical order whatever the order).
var multiNames = [][]string{{"hot-a", "hot-b"}, {"hot-c", "hot-b"}, {"hot-a", "hot-c"}}

// workerSpec is one worker's part in a cell: its kind and names.
type workerSpec struct {
	kind  Kind
	names []string
	limit int // permits: the semaphore's limit
}

// recipeWorkers are the workers of a cell of recipe k: a read-write cell
// has one writer and two readers, a semaphore cell recipeLimit+2 permit
// holders, a multi cell three workers over overlapping pairs of names,
// a leader cell three candidates; a mutex cell n writers.
func recipeWorkers(k Kind, n int) []workerSpec {
	hot := []string{"hot"}
	switch k {
	case Reader:
		return []workerSpec{{kind: Writer, names: hot}, {kind: Reader, names: hot}, {kind: Reader, names: hot}}
	case Permit:
		var out []workerSpec
		for range recipeLimit + 2 {
			out = append(out, workerSpec{kind: Permit, names: hot, limit: recipeLimit})
		}
		return out
	case Multi:
		var out []workerSpec
		for _, p := range multiNames {
			out = append(out, workerSpec{kind: Multi, names: p})
		}
		return out
	case Leader:
		return []workerSpec{{kind: Leader, names: hot}, {kind: Leader, names: hot}, {kind: Leader, names: hot}}
	}
	var out []workerSpec
	for range n {
		out = append(out, workerSpec{kind: Writer, names: hot})
	}
	return out
}

// supported reports whether a backend with caps runs recipe k, and if not
// which capability it lacks.
func supported(k Kind, caps padlock.Capabilities) (bool, string) {
	switch {
	case k == Reader && !caps.SharedLocks:
		return false, "SharedLocks"
	case k == Permit && !caps.Limits:
		return false, "Limits"
	case k == Leader && !caps.Elections:
		return false, "Elections"
	}
	return true, ""
}

// recipeBases are the holder scenarios each recipe runs, by the mutex
// scenario's ID: the holder paused, cut off and crashed.
var recipeBases = []int{1, 4, 11}

// recipeKinds are the recipes, in the order of their scenarios' IDs: a
// recipe's scenario is numbered 100 times its place plus its base's ID
// (reader-holder-paused is 101, leader-holder-crashed 411).
var recipeKinds = []Kind{Reader, Permit, Multi, Leader}

// recipeVictim says, per recipe, whose hold the fault is aimed at.
var recipeVictim = map[Kind]string{
	Reader: "a reader (beside another reader, with a writer waiting)",
	Permit: fmt.Sprintf("one of %d permits (with %d holders contending)", recipeLimit, recipeLimit+2),
	Multi:  "a multi-lock over two names (three workers over overlapping pairs)",
	Leader: "the leader, inside its term (three candidates)",
}

// recipeScenarios makes the recipes' scenarios from the mutex's holder
// scenarios: the same fault, the same expected outcome, the same
// assumption broken, with the recipe's hold as the victim.
func recipeScenarios(base []*Scenario) []*Scenario {
	var out []*Scenario
	for i, k := range recipeKinds {
		for _, id := range recipeBases {
			var b *Scenario
			for _, s := range base {
				if s.ID == id {
					b = s
				}
			}
			s := *b
			s.ID = 100*(i+1) + id
			s.Name = string(k) + "-" + b.Name
			s.Recipe = k
			s.Workers = 0
			s.Summary = fmt.Sprintf("Scenario %d (%s) with %s as the victim. %s", b.ID, b.Name, recipeVictim[k], b.Summary)
			out = append(out, &s)
		}
	}
	return out
}

// parseNames splits a comma-separated list of lock names.
func parseNames(s string) []string {
	var out []string
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}
