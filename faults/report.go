package faults

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// ms formats a duration in milliseconds, or "-" for none.
func ms(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%d", d.Milliseconds())
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// WriteTable prints results as an aligned table.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "backend\tscenario\texpect\tops\tfaults\toverlaps\tstale: unfenced\tfenced acc/early/rej\ttokens out of order\tmodel\tlost upd\tlate Done\tdetect ms\trecover ms\tleaks\tverdict")
	for _, r := range results {
		if r.Expected == NA {
			fmt.Fprintf(tw, "%s\t%d %s\tn/a\t\t\t\t\t\t\t\t\t\t\t\t\n", r.Backend, r.Scenario, r.Name)
			continue
		}
		late := fmt.Sprint(r.LateDone)
		if r.Stalled > 0 {
			late += fmt.Sprintf(" (+%d stalled)", r.Stalled)
		}
		fmt.Fprintf(tw, "%s\t%d %s\t%s\t%d\t%d\t%d\t%d\t%d/%d/%d\t%d\t%s\t%d\t%s\t%s\t%s\t%d\t%s\n",
			r.Backend, r.Scenario, r.Name, r.Expected, r.Ops, r.Faults, r.Overlaps, r.StaleUnfenced,
			r.StaleFencedAccepted, r.StaleBeforeContact, r.StaleFencedRejected, r.TokenOrder+r.FreshRejected+r.FencedOrder,
			orDash(r.Tokens), r.LostUnfenced, late, ms(r.Detect), ms(r.Recover), r.Leaks, r.Verdict)
	}
	return tw.Flush()
}

// summaryCell is one result in a word or three: what happened to
// exclusion, whether fencing held, and whether the loss was known in time.
func summaryCell(r Result) string {
	if r.Expected == NA {
		return "·"
	}
	var parts []string
	switch {
	case r.Overlaps > 0:
		parts = append(parts, fmt.Sprintf("overlap ×%d", r.Overlaps))
	case r.StaleUnfenced > 0:
		parts = append(parts, "stale writes")
	default:
		parts = append(parts, "safe")
	}
	switch {
	case r.StaleFencedAccepted > 0 || r.FencedOrder > 0 || r.Tokens == "illegal":
		parts = append(parts, "fencing broke")
	case r.StaleFencedRejected > 0:
		parts = append(parts, "fencing held")
	}
	if r.LateDone > 0 {
		parts = append(parts, "Done late")
	}
	if r.Stalled > 0 {
		parts = append(parts, "holder stalled")
	}
	cell := strings.Join(parts, ", ")
	if r.Verdict != "ok" {
		cell = "**✗ " + cell + "**"
	}
	return cell
}

// summary renders a matrix, a row per backend and a column per scenario,
// of summaryCell.
func summary(results []Result, scenarios []*Scenario) string {
	var backends []string
	cells := map[string]map[int]string{}
	for _, r := range results {
		if cells[r.Backend] == nil {
			cells[r.Backend] = map[int]string{}
			backends = append(backends, r.Backend)
		}
		cells[r.Backend][r.Scenario] = summaryCell(r)
	}
	var b strings.Builder
	b.WriteString("| backend |")
	var ids []int
	for _, sc := range scenarios {
		ids = append(ids, sc.ID)
		fmt.Fprintf(&b, " %d |", sc.ID)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(ids)) + "\n")
	for _, be := range backends {
		fmt.Fprintf(&b, "| `%s` |", be)
		for _, id := range ids {
			c := cells[be][id]
			if c == "" {
				c = "·"
			}
			fmt.Fprintf(&b, " %s |", c)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Markdown renders a report as the measured section of docs/guarantees.md:
// the run, its backends, a summary matrix, then one table per scenario, a
// row per backend.
func Markdown(rep *Report) string {
	var b strings.Builder
	h := rep.Host
	fmt.Fprintf(&b, "Run %s to %s on %s/%s with %d CPUs", rep.Started.Format("2006-01-02 15:04"),
		rep.Finished.Format("15:04 MST"), h.OS, h.Arch, h.CPUs)
	if h.Model != "" {
		fmt.Fprintf(&b, " (%s)", h.Model)
	}
	fmt.Fprintf(&b, ", %s", h.Go)
	if h.LoadStart >= 0 && h.LoadEnd >= 0 {
		fmt.Fprintf(&b, ", one-minute load average %.2f at the start and %.2f at the end", h.LoadStart, h.LoadEnd)
	}
	if rep.Command != "" {
		fmt.Fprintf(&b, ", by `%s`", rep.Command)
	}
	fmt.Fprintf(&b, ": %d runs of a scenario on a backend (of %d pairs; the others do not apply), %d faults each", rep.applied(), len(rep.Results), rep.Faults)
	if rep.Duration > 0 {
		fmt.Fprintf(&b, " or more, for %v", rep.Duration)
	}
	if n := rep.failed(); n > 0 {
		fmt.Fprintf(&b, "; **%d went against their expected outcome**.\n\n", n)
	} else {
		b.WriteString("; every one as expected.\n\n")
	}
	b.WriteString("| backend | server | URL options | TTL |\n|---|---|---|---|\n")
	for _, be := range rep.Backends {
		server := be.Kind
		if be.Nodes > 1 {
			server = fmt.Sprintf("%s, %d nodes", be.Kind, be.Nodes)
		}
		if be.Partitions {
			server += ", each on a test host of its own"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %v |\n", be.Name, server, orDash(be.Query), be.TTL)
	}
	b.WriteString("\n### Summary\n\n")
	b.WriteString("Each cell is one run of a scenario (columns, numbered as below) on a backend (rows): *safe* (no two clients inside at once, no stale write), *overlap ×N* (N pairs of critical sections overlapped), *stale writes* (a write landed after another client's grant, without overlap); then whether the fenced resource refused every stale write (*fencing held*) or not, or tokens came out of grant order (*fencing broke*); *Done late*: a holder learnt of its loss only after another client's grant; *holder stalled*: it did, while the machine ran nothing of its process (measured by the process, with no fault of the scenario's stopping it), counted apart. · is a scenario that does not apply. A bold **✗** marks a run that went against its expected outcome.\n\n")
	scenarios := rep.scenarios()
	var mutex, recipes []*Scenario
	for _, sc := range scenarios {
		if sc.Recipe == "" {
			mutex = append(mutex, sc)
		} else {
			recipes = append(recipes, sc)
		}
	}
	b.WriteString(summary(rep.Results, mutex))
	b.WriteString("\n")
	if len(recipes) > 0 {
		b.WriteString("### Summary of the recipes\n\n")
		b.WriteString("The holder scenarios again, with a reader (1xx), a permit (2xx), a multi-lock (3xx) or a leader (4xx) as the victim (see [the recipes under faults](#the-recipes-under-faults)); the cells read as above, an overlap being a writer beside anyone, more permits than the limit, or two multi-locks over a common name. · is a scenario that does not apply, or a recipe the backend does not run (its table says which capability it lacks).\n\n")
		b.WriteString(summary(rep.Results, recipes))
		b.WriteString("\n")
	}
	for _, sc := range scenarios {
		var rows []Result
		for _, r := range rep.Results {
			if r.Scenario == sc.ID {
				rows = append(rows, r)
			}
		}
		fmt.Fprintf(&b, "### %d. %s\n\n%s\n\n", sc.ID, sc.Name, sc.Summary)
		if sc.Recipe == "" {
			b.WriteString("| backend | expected | measured | grants | faults | overlaps (longest, ms) | stale writes: unfenced accepted | fenced accepted / before contact / refused | tokens out of grant order | lock model | lost updates (unfenced) | Done after the next grant (latest, ms) | detect (ms) | recover (ms) | left behind | verdict |\n")
			b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		} else {
			b.WriteString("| backend | expected | measured | grants | faults | most at once | overlaps (longest, ms) | stale writes: unfenced accepted | fenced accepted / before contact / refused | fenced accepted out of token order | tokens out of grant order | lock model | lost updates (unfenced) | Done after the next grant (latest, ms) | detect (ms) | recover (ms) | left behind | verdict |\n")
			b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		}
		for _, r := range rows {
			if r.Expected == NA {
				why := " |"
				if r.NotRun != "" {
					why = " " + r.NotRun + " |"
				}
				fmt.Fprintf(&b, "| `%s` | n/a |%s%s\n", r.Backend, strings.Repeat(" |", 13+2*btoi(sc.Recipe != "")), why)
				continue
			}
			if sc.Recipe == "" {
				fmt.Fprintf(&b, "| `%s` | %s | %s | %d | %d | %s | %d | %d / %d / %d | %d | %s | %d | %s | %s | %s | %d | %s |\n",
					r.Backend, r.Expected, r.Measured, r.Ops, r.Faults, countMax(r.Overlaps, r.OverlapMax), r.StaleUnfenced, r.StaleFencedAccepted,
					r.StaleBeforeContact, r.StaleFencedRejected, r.TokenOrder+r.FreshRejected+r.FencedOrder, orDash(r.Tokens), r.LostUnfenced,
					countMax(r.LateDone, r.LateDoneMax), ms(r.Detect), ms(r.Recover), r.Leaks, strings.ReplaceAll(r.Verdict, "|", "/"))
				continue
			}
			most := "-"
			if r.Shared > 0 {
				most = fmt.Sprint(r.Shared)
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %d | %d | %s | %s | %d | %d / %d / %d | %d | %d | %s | %d | %s | %s | %s | %d | %s |\n",
				r.Backend, r.Expected, r.Measured, r.Ops, r.Faults, most, countMax(r.Overlaps, r.OverlapMax), r.StaleUnfenced, r.StaleFencedAccepted,
				r.StaleBeforeContact, r.StaleFencedRejected, r.FencedOrder, r.TokenOrder+r.FreshRejected, orDash(r.Tokens), r.LostUnfenced,
				countMax(r.LateDone, r.LateDoneMax), ms(r.Detect), ms(r.Recover), r.Leaks, strings.ReplaceAll(r.Verdict, "|", "/"))
		}
		b.WriteString("\n")
		if sc.Starve {
			b.WriteString(starvationTable(rows))
		}
	}
	return b.String()
}

// starvationTable is how each client fared in a scenario that checks
// that no client starves (Scenario.Starve).
func starvationTable(rows []Result) string {
	var b strings.Builder
	b.WriteString("How the clients fared: *fewest grants* is that of the client granted the lock least often in the run, *longest wait* the longest any client waited for a grant (from the attempt that began its wait, retries included), and *starved* the clients never granted the lock.\n\n")
	b.WriteString("| backend | clients | ran (s) | grants | fewest grants | longest wait (ms) | starved |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		if r.Expected == NA || r.Clients == 0 {
			continue
		}
		fmt.Fprintf(&b, "| `%s` | %d | %.0f | %d | %d | %s | %d |\n", r.Backend, r.Clients, r.Ran.Seconds(), r.Ops, r.FewestGrants, ms(r.MaxWait), r.Starved)
	}
	b.WriteString("\n")
	return b.String()
}

// countMax is n, with the longest duration in milliseconds when n > 0.
func countMax(n int, longest time.Duration) string {
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%d)", n, longest.Round(time.Millisecond).Milliseconds())
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
