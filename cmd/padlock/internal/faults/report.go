package faults

import (
	"bytes"
	"fmt"
	"io"
	"os"
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
		fmt.Fprintf(tw, "%s\t%d %s\t%s\t%d\t%d\t%d\t%d\t%d/%d/%d\t%d\t%s\t%d\t%d\t%s\t%s\t%d\t%s\n",
			r.Backend, r.Scenario, r.Name, r.Expected, r.Ops, r.Faults, r.Overlaps, r.StaleUnfenced,
			r.StaleFencedAccepted, r.StaleBeforeContact, r.StaleFencedRejected, r.TokenOrder+r.FreshRejected,
			orDash(r.Tokens), r.LostUnfenced, r.LateDone, ms(r.Detect), ms(r.Recover), r.Leaks, r.Verdict)
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
	case r.StaleFencedAccepted > 0 || r.Tokens == "illegal":
		parts = append(parts, "fencing broke")
	case r.StaleFencedRejected > 0:
		parts = append(parts, "fencing held")
	}
	if r.LateDone > 0 {
		parts = append(parts, "Done late")
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

// Markdown renders results as the measured section of docs/guarantees.md:
// a summary matrix, then one table per scenario, a row per backend.
func Markdown(results []Result, scenarios []*Scenario) string {
	var b strings.Builder
	b.WriteString("### Summary\n\n")
	b.WriteString("Each cell is one run of a scenario (columns, numbered as below) on a backend (rows): *safe* (no two clients inside at once, no stale write), *overlap ×N* (N pairs of critical sections overlapped), *stale writes* (a write landed after another client's grant, without overlap); then whether the fenced resource refused every stale write (*fencing held*) or not, or tokens came out of grant order (*fencing broke*); *Done late*: a holder learnt of its loss only after another client's grant. · is a scenario that does not apply. A bold **✗** marks a run that went against its expected outcome.\n\n")
	b.WriteString(summary(results, scenarios))
	b.WriteString("\n")
	for _, sc := range scenarios {
		var rows []Result
		for _, r := range results {
			if r.Scenario == sc.ID {
				rows = append(rows, r)
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(&b, "### %d. %s\n\n%s\n\n", sc.ID, sc.Name, sc.Summary)
		b.WriteString("| backend | expected | grants | faults | overlaps | stale writes: unfenced accepted | fenced accepted / before contact / refused | tokens out of grant order | lock model | lost updates (unfenced) | Done after the next grant | detect (ms) | recover (ms) | left behind | verdict |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range rows {
			if r.Expected == NA {
				fmt.Fprintf(&b, "| `%s` | n/a | | | | | | | | | | | | | |\n", r.Backend)
				continue
			}
			fmt.Fprintf(&b, "| `%s` | %s | %d | %d | %d | %d | %d / %d / %d | %d | %s | %d | %d | %s | %s | %d | %s |\n",
				r.Backend, r.Expected, r.Ops, r.Faults, r.Overlaps, r.StaleUnfenced, r.StaleFencedAccepted,
				r.StaleBeforeContact, r.StaleFencedRejected, r.TokenOrder+r.FreshRejected, orDash(r.Tokens), r.LostUnfenced,
				r.LateDone, ms(r.Detect), ms(r.Recover), r.Leaks, strings.ReplaceAll(r.Verdict, "|", "/"))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Markers delimit the generated part of docs/guarantees.md.
const (
	beginMarker = "<!-- faults:begin (generated by padlock faults --docs; do not edit) -->"
	endMarker   = "<!-- faults:end -->"
)

// UpdateDoc replaces the generated part of the Markdown file at path with
// section, which the file's markers delimit.
func UpdateDoc(path, section string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i, j := bytes.Index(old, []byte(beginMarker)), bytes.Index(old, []byte(endMarker))
	if i < 0 || j < i {
		return fmt.Errorf("%s: no %q ... %q markers", path, beginMarker, endMarker)
	}
	var b bytes.Buffer
	b.Write(old[:i+len(beginMarker)])
	b.WriteString("\n\n")
	b.WriteString(section)
	b.Write(old[j:])
	return os.WriteFile(path, b.Bytes(), 0o644)
}
