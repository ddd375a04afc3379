package faults

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// Outcomes lists every Outcome, in the order the legend explains them.
var Outcomes = []Outcome{SAFE, DET, MX, UNAV, UNSAFE, NA}

// Meaning says in one line what the outcome o promises, for the legend
// under the table ("" for an outcome that has none: a bug the tests
// catch).
func (o Outcome) Meaning() string {
	switch o {
	case SAFE:
		return "no overlap, no stale write accepted, no update lost"
	case DET:
		return "the holder learns of its loss (Done closes) before anyone else is granted the lock"
	case MX:
		return "critical sections may overlap; with fencing, every stale write is refused (unless the tokens are not monotonic)"
	case UNAV:
		return "only availability is lost while the fault lasts"
	case UNSAFE:
		return "nothing is promised: exclusion and fencing may both break; the run measures what happens"
	case NA:
		return "the scenario does not apply to the backend, or the backend does not run its recipe (its Capabilities lack SharedLocks, Limits or Elections)"
	}
	return ""
}

// WriteLegend explains what WriteTable printed for results: each expected
// outcome that appears, the verdicts, and the abbreviated columns.
func WriteLegend(w io.Writer, results []Result) error {
	var seen []Outcome
	for _, r := range results {
		if !slices.Contains(seen, r.Expected) {
			seen = append(seen, r.Expected)
		}
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "expect: what the scenario is expected to do to the backend")
	for _, o := range Outcomes {
		if slices.Contains(seen, o) {
			fmt.Fprintf(tw, "  %s\t%s\n", o, o.Meaning())
		}
	}
	for _, o := range seen {
		if !slices.Contains(Outcomes, o) {
			fmt.Fprintf(tw, "  %s\t%s\n", o, o.Meaning())
		}
	}
	fmt.Fprintln(tw, "verdict:")
	fmt.Fprintln(tw, "  ok\tthe run kept its expected outcome: no error, leak or late Done it does not allow, every fault bit")
	fmt.Fprintln(tw, "  n/a\tnot run: the scenario does not apply")
	fmt.Fprintln(tw, "  (text)\twhat went against the expected outcome; the run failed")
	fmt.Fprintln(tw, "columns:")
	for _, c := range [][2]string{
		{"ops", "grants; faults: faults injected"},
		{"overlaps", "pairs of critical sections of different clients that overlapped in time though they exclude each other (readers share), and stretches with more permits held than the limit"},
		{"stale: unfenced", "writes after another client's grant that the plain register took"},
		{"fenced acc/early/rej", "the fenced register's stale writes: accepted though a newer holder had shown its token / taken before any newer holder wrote / refused"},
		{"tokens out of order", "grants whose token was not above the one before, current holders' writes refused, and fenced writes accepted out of token order (two holders' writes in one term)"},
		{"model", "the acquires and releases checked against the lock model: ok, illegal or unknown"},
		{"lost upd", "updates lost on the plain register"},
		{"late Done", "losses whose Done closed after another client's grant; (+N stalled): N holders more whose late Done a stall of their own process explains (the machine ran none of it), counted apart; a run fails with more of them than one, or than one in eight of its faults if that is more"},
		{"detect ms", "longest from a fault to its victim's Done; recover ms: to another client's grant"},
		{"leaks", "holders left on the server after the run"},
		{"-", "nothing measured (no loss to detect, no model check)"},
	} {
		fmt.Fprintf(tw, "  %s\t%s\n", c[0], c[1])
	}
	return tw.Flush()
}
