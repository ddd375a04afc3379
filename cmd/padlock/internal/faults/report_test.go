package faults

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The generated part of a document is replaced between its markers, and
// nothing else changes; a document without markers is an error.
func TestUpdateDoc(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.md")
	doc := "# Title\n\nintro\n\n" + beginMarker + "\nold table\n" + endMarker + "\n\nafter\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	results := []Result{
		{Backend: "etcd", Scenario: 1, Name: "holder-paused", Expected: MX, Ops: 9, Faults: 2, Overlaps: 2,
			StaleUnfenced: 2, StaleFencedRejected: 2, Detect: 1500 * time.Millisecond, Verdict: "ok"},
		{Backend: "redis-cluster", Scenario: 1, Name: "holder-paused", Expected: NA, Verdict: "n/a"},
	}
	section := Markdown(results, Scenarios)
	for i := 0; i < 2; i++ { // twice: regenerating replaces, never appends
		if err := UpdateDoc(path, section); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(path)
	got := string(b)
	for _, want := range []string{"# Title\n\nintro\n\n" + beginMarker, "### 1. holder-paused",
		"| `etcd` | MX | 9 | 2 | 2 | 2 | 0 / 2 | 0 | 0 | 1500 | - | 0 | ok |", "| `redis-cluster` | n/a |",
		endMarker + "\n\nafter\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("document lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "old table") || strings.Count(got, "### 1.") != 1 {
		t.Errorf("old section kept or doubled:\n%s", got)
	}
	if err := os.WriteFile(path, []byte("no markers"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := UpdateDoc(path, section); err == nil {
		t.Error("a document without markers was updated")
	}
}

// Unknown backends and scenarios are ErrInvalid, and say which.
func TestNames(t *testing.T) {
	if _, err := BackendNamed("cassandra"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "cassandra") {
		t.Errorf("BackendNamed: %v", err)
	}
	if _, err := ScenariosByID("1,99"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "99") {
		t.Errorf("ScenariosByID: %v", err)
	}
	got, err := ScenariosByID("holder-crashed,1")
	if err != nil || len(got) != 2 || got[0].ID != 11 || got[1].ID != 1 {
		t.Errorf("ScenariosByID by name and number: %v, %v", got, err)
	}
}

// The checker on a hand-made history: a paused holder's late write is an
// overlap and a stale write; its loss came after the next grant.
func TestCheckPausedHolder(t *testing.T) {
	tr := boolp(true)
	fa := boolp(false)
	evs := []Event{
		{T: 10, Client: 1, Op: OpAcquire, Phase: OK, Token: 5},
		{T: 20, Client: 1, Op: OpRead, Phase: OK, Token: 5},
		{T: 25, Client: 1, Op: OpFault, Phase: Invoke, Fault: "pause"},
		{T: 100, Client: 2, Op: OpAcquire, Phase: OK, Token: 6},
		{T: 110, Client: 2, Op: OpRead, Phase: OK, Token: 6},
		{T: 120, Client: 2, Op: OpApply, Register: "unfenced", Token: 6, Accepted: tr},
		{T: 120, Client: 2, Op: OpApply, Register: "fenced", Token: 6, Accepted: tr},
		{T: 130, Client: 2, Op: OpRelease, Phase: Invoke, Token: 6},
		{T: 140, Client: 1, Op: OpFault, Phase: OK, Fault: "pause"},
		{T: 145, Client: 1, Op: OpLost, Phase: OK, Token: 5},
		{T: 150, Client: 1, Op: OpApply, Register: "unfenced", Token: 5, Accepted: tr},
		{T: 150, Client: 1, Op: OpApply, Register: "fenced", Token: 5, Accepted: fa},
	}
	var r Result
	check(&r, evs[:5:5], ResourceState{})
	if r.Overlaps != 1 {
		t.Errorf("%d overlaps while the paused holder still holds, want 1", r.Overlaps)
	}
	r = Result{}
	check(&r, evs, ResourceState{AppliedUnfenced: 2, Unfenced: 1, AppliedFenced: 1, Fenced: 1})
	if r.Overlaps != 1 || r.OverlapTime != 30 || r.StaleUnfenced != 1 || r.StaleFencedRejected != 1 ||
		r.StaleFencedAccepted != 0 || r.LateDone != 1 || r.LostUnfenced != 1 || r.LostFenced != 0 ||
		r.Detect != 120 || r.Recover != 75 || r.Faults != 1 || r.Ops != 2 {
		t.Errorf("check: %+v", r)
	}
	r.Expected = MX
	if v := verdict(&r, true); v != "ok" {
		t.Errorf("verdict %q, want ok", v)
	}
	r.StaleFencedAccepted = 1
	if v := verdict(&r, true); !strings.Contains(v, "stale writes through") {
		t.Errorf("verdict with a stale write accepted: %q", v)
	}
	r.Expected, r.StaleFencedAccepted = DET, 0
	if v := verdict(&r, true); !strings.Contains(v, "overlapping") || !strings.Contains(v, "after the next grant") {
		t.Errorf("DET verdict on an overlap: %q", v)
	}
}
