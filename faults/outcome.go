package faults

import (
	"fmt"
	"strings"
	"time"
)

// Outcome is what a scenario is expected to do to a backend. Each allows
// a range of Measured outcomes (bounds): a run that measures less than
// its expectation did not bite, one that measures more broke more than
// the backend is expected to.
type Outcome string

// Outcomes.
const (
	// SAFE: no two clients inside at once, fencing intact, every loss
	// known before anyone else's grant (measured: Safe, or Stale from a
	// holder that was told).
	SAFE Outcome = "SAFE"
	// MX: mutual exclusion is violated: critical sections overlap, or a
	// write lands after another client's grant; fencing intact (measured:
	// Stale or Overlap). The lock cannot help: fencing must.
	MX Outcome = "MX"
	// DET: the holder's loss is detected (Done closes) before anyone else
	// is granted the lock (measured: Safe or Stale).
	DET Outcome = "DET"
	// UNAV: only availability is lost while the fault lasts (measured:
	// Safe or Stale).
	UNAV Outcome = "UNAV"
	// UNSAFE: the backend forgets the lock and its tokens: fencing breaks
	// (measured: FencingBroke; Overlap where the backend has no monotonic
	// tokens to break).
	UNSAFE Outcome = "UNSAFE"
	// MXorDET: the fault takes the lock from its holder, and whether
	// another client is granted it before the holder's Done closes (MX)
	// or after (DET) is a race; fencing intact (measured: Safe to
	// Overlap; each fault must take the lock, see check).
	MXorDET Outcome = "MX or DET"
	// UNSAFEorSAFE: the fault breaks exclusion only when a race went one
	// way (RedLock: when the holder had won a bare majority of masters),
	// and does nothing otherwise; never more than an overlap of the
	// faulted hold (measured: anything, with that overlap rule).
	UNSAFEorSAFE Outcome = "UNSAFE or SAFE"
	// NA: the scenario does not apply to the backend.
	NA Outcome = "n/a"
)

// Measured is what a run did to the lock's promises, from least broken to
// most: the worst thing that happened in any of its faults.
type Measured int

// Measured outcomes.
const (
	// NotMeasured is a run that did not run (its scenario does not apply).
	NotMeasured Measured = iota
	// Safe: no write landed after another client's grant.
	Safe
	// Stale: writes landed after another client's grant, from a holder
	// whose Done had closed (and that wrote anyway, as the suite's
	// workers do) or whose write the network held past its release; no
	// two clients inside at once; fencing intact.
	Stale
	// Overlap: two clients inside at once by their own account (granted
	// while another's Done had not closed), or a loss reported after the
	// next grant; fencing intact.
	Overlap
	// FencingBroke: on a backend with monotonic tokens, the fenced
	// register took a stale write after the newer holder's contact, lost
	// an update, refused a current holder's write, or accepted writes out
	// of token order (two leaders' in one term), or the lock model
	// rejected the history (tokens out of grant order, a release that
	// was not the holder's).
	FencingBroke
)

var measuredNames = []string{"", "safe", "stale writes", "overlap", "fencing broke"}

// String names m as the docs and results.json do.
func (m Measured) String() string {
	if m < 0 || int(m) >= len(measuredNames) {
		return fmt.Sprintf("Measured(%d)", int(m))
	}
	return measuredNames[m]
}

// MarshalText writes m by name, as results.json records it.
func (m Measured) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText reads a name that MarshalText wrote.
func (m *Measured) UnmarshalText(b []byte) error {
	for i, n := range measuredNames {
		if n == string(b) && n != "" {
			*m = Measured(i)
			return nil
		}
	}
	return fmt.Errorf("%w: measured outcome %q (want one of %s)", ErrInvalid, b, strings.Join(measuredNames[1:], ", "))
}

// measure classifies what r measured. Without monotonic tokens (RedLock)
// there is no fencing to break, and what the fenced register did with
// the tokens it was shown decides nothing.
func measure(r *Result, monotonic bool) Measured {
	switch {
	case monotonic && (r.StaleFencedAccepted > 0 || r.LostFenced > 0 || r.FreshRejected > 0 || r.FencedOrder > 0 || r.Tokens == "illegal"):
		return FencingBroke
	case r.Overlaps > 0 || r.LateDone > 0:
		return Overlap
	case r.StaleUnfenced > 0 || r.StaleBeforeContact > 0 || r.StaleFencedRejected > 0 || r.StaleFencedAccepted > 0:
		return Stale
	}
	return Safe
}

// bounds is the range of Measured outcomes that o allows.
func (o Outcome) bounds(monotonic bool) (lo, hi Measured) {
	switch o {
	case MX:
		return Stale, Overlap
	case MXorDET:
		return Safe, Overlap
	case UNSAFE:
		if !monotonic {
			return Overlap, Overlap
		}
		return FencingBroke, FencingBroke
	case UNSAFEorSAFE:
		return Safe, FencingBroke
	}
	return Safe, Stale
}

// overlapAllowed reports whether o allows two holds to overlap: under
// UNSAFE any may; under MX, MXorDET and UNSAFEorSAFE only those the fault
// was aimed at (faulted: one of the two was); elsewhere none.
func (o Outcome) overlapAllowed(faulted bool) bool {
	switch o {
	case UNSAFE:
		return true
	case MX, MXorDET, UNSAFEorSAFE:
		return faulted
	}
	return false
}

// verdict measures r (r.Measured) and compares it with its expected
// outcome: "ok", or what went against it.
func verdict(r *Result, monotonic bool) string {
	if r.Expected == NA {
		return "n/a"
	}
	r.Measured = measure(r, monotonic)
	lo, hi := r.Expected.bounds(monotonic)
	var bad []string
	if r.Err != "" {
		bad = append(bad, "error: "+r.Err)
	}
	if r.Faults == 0 {
		bad = append(bad, "no fault injected")
	}
	if r.Leaks > 0 {
		bad = append(bad, fmt.Sprintf("%d holders left behind", r.Leaks))
	}
	if r.Measured < lo {
		bad = append(bad, fmt.Sprintf("measured %s, less than %s expects (%s at least): the fault stopped biting", r.Measured, r.Expected, lo))
	}
	if r.Measured > hi {
		bad = append(bad, fmt.Sprintf("measured %s, more than %s allows (%s at most)", r.Measured, r.Expected, hi))
	}
	if monotonic && hi < FencingBroke {
		if r.StaleFencedAccepted > 0 {
			bad = append(bad, fmt.Sprintf("fencing let %d stale writes through", r.StaleFencedAccepted))
		}
		if r.LostFenced > 0 {
			bad = append(bad, fmt.Sprintf("%d updates lost despite fencing", r.LostFenced))
		}
		if r.FreshRejected > 0 {
			bad = append(bad, fmt.Sprintf("tokens out of grant order: %d current holders' writes refused", r.FreshRejected))
		}
		if r.FencedOrder > 0 {
			bad = append(bad, fmt.Sprintf("%d fenced writes accepted out of token order (two holders' writes accepted in one term)", r.FencedOrder))
		}
		if r.Tokens != "ok" {
			// Porcupine, not TokenOrder (answer order), which two
			// concurrent grants may answer in either order.
			bad = append(bad, fmt.Sprintf("acquires and releases against the lock model: %s (tokens out of grant order, or a release not the holder's)%s",
				r.Tokens, visualNote(r.Visual)))
		}
	}
	if hi < Overlap && r.LateDone > 0 {
		bad = append(bad, fmt.Sprintf("%d losses reported after the next grant (up to %v)", r.LateDone,
			r.LateDoneMax.Round(time.Millisecond)))
	}
	if n := stallBudget(r.Faults); r.Stalled > n {
		bad = append(bad, fmt.Sprintf("%d holders' late Dones excused by stalls of their own processes (up to %v after the next grant), "+
			"more than the %d a cell of %d faults allows: the machine ran too little of the workers for the run to test the lock",
			r.Stalled, r.StalledMax.Round(time.Millisecond), n, r.Faults))
	}
	bad = append(bad, r.Problems...)
	if len(bad) == 0 {
		return "ok"
	}
	return strings.Join(bad, "; ")
}

func visualNote(path string) string {
	if path == "" {
		return ""
	}
	return " (see " + path + ")"
}

// Assumption is one of the assumptions of the lost-lock rule
// (docs/lost-lock.md): where a fault breaks one, Done may come after
// another client's grant.
type Assumption string

// Assumptions a scenario can break.
const (
	// HolderActs: the holder can act on its Done before it writes; a
	// paused process cannot, and a write held up on the network arrives
	// after its sender let go. Only fencing helps.
	HolderActs Assumption = "the holder can act on Done"
	// ServerKeepsState: the server keeps a lease for its whole TTL (a
	// restart without persistence, a failover to a replica that never
	// saw the grant, or a lock tied to a connection forgets it).
	ServerKeepsState Assumption = "the server keeps its state"
	// ServerClock: the server's clock runs within the safety margin of
	// the client's; a clock that jumps or runs fast expires a lease early.
	ServerClock Assumption = "the server's clock moves at most the margin"
)
