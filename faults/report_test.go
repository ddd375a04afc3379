package faults

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/padlock-go/padlock/bench"
)

// The generated parts of a document are replaced between their markers,
// and nothing else changes; a document without markers is an error.
func TestUpdateDoc(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.md")
	main, exc := sections[0], sections[1]
	doc := "# Title\n\nintro\n\n" + main.begin + "\nold table\n" + main.end + "\n\nmiddle\n\n" +
		exc.begin + "\nold list\n" + exc.end + "\n\nafter\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := &Report{Started: time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC), Finished: time.Date(2026, 12, 2, 6, 15, 0, 0, time.UTC),
		Host: bench.Host{OS: "linux", Arch: "amd64", CPUs: 2, Go: "go1.26.8", Model: "Xeon", LoadStart: 1.5, LoadEnd: 2.25}, Command: "padlock faults --all", Faults: 2,
		Backends: []BackendInfo{{Name: "etcd", Kind: "etcd", TTL: 2 * time.Second}, {Name: "redis-cluster", Kind: "redis-cluster", TTL: time.Second}},
		Results: []Result{
			{Backend: "etcd", Scenario: 1, Name: "holder-paused", Expected: MX, Measured: Overlap, Ops: 9, Faults: 2, Overlaps: 2,
				OverlapMax: 85 * time.Millisecond, StaleUnfenced: 2, StaleFencedRejected: 2, Detect: 1500 * time.Millisecond, Tokens: "ok", Verdict: "ok"},
			{Backend: "redis-cluster", Scenario: 1, Name: "holder-paused", Expected: NA, Verdict: "n/a"},
			{Backend: "etcd", Scenario: 6, Name: "server-restarted", Expected: SAFE, Measured: Safe, Ops: 9, Faults: 2, Tokens: "ok", Verdict: "ok"},
			{Backend: "redis-cluster", Scenario: 6, Name: "server-restarted", Expected: UNSAFE, Measured: FencingBroke, Ops: 9, Faults: 2,
				FreshRejected: 3, Tokens: "illegal", Verdict: "ok"},
			{Backend: "etcd", Scenario: 14, Name: "server-paused", Expected: UNAV, Measured: Overlap, Ops: 9, Faults: 2, Overlaps: 1,
				OverlapMax: 1600 * time.Microsecond, LateDone: 1, LateDoneMax: 2 * time.Millisecond, Detect: 919 * time.Millisecond,
				Tokens: "ok", Verdict: "measured overlap, more than UNAV allows"},
		}}
	for i := 0; i < 2; i++ { // twice: regenerating replaces, never appends
		if err := UpdateDoc(path, rep); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(path)
	got := string(b)
	for _, want := range []string{"# Title\n\nintro\n\n" + main.begin, "### 1. holder-paused", "### Summary",
		"Run 2026-12-02 06:00 to 06:15 UTC on linux/amd64 with 2 CPUs (Xeon), go1.26.8, one-minute load average 1.50 at the start and 2.25 at the end, by `padlock faults --all`: 4 runs of a scenario on a backend (of 5 pairs; the others do not apply), 2 faults each; **1 went against their expected outcome**.",
		"| `etcd` | etcd | - | 2s |",
		"| `etcd` | overlap ×2, fencing held |", "| `redis-cluster` | · |",
		"| `etcd` | MX | overlap | 9 | 2 | 2 (85) | 2 | 0 / 0 / 2 | 0 | ok | 0 | 0 | 1500 | - | 0 | ok |", "| `redis-cluster` | n/a |",
		main.end + "\n\nmiddle\n\n" + exc.begin,
		// The exceptions: the restart that broke fencing, not the
		// paused holder (its own process) nor etcd's safe restart.
		"| `redis-cluster` | 6. server-restarted | the server keeps its state | UNSAFE | fencing broke | 0 | 0 | never |\n" +
			"| `etcd` | 14. server-paused | none of them | UNAV | **✗ overlap** | 1 (2) | 1 (2) | 919 |\n\n" + exc.end + "\n\nafter\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("document lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "old table") || strings.Contains(got, "old list") || strings.Count(got, "### 1.") != 1 ||
		strings.Contains(got, "| `etcd` | 1. holder-paused") || strings.Contains(got, "| `etcd` | 6.") {
		t.Errorf("old section kept or doubled, or a row that is no exception listed:\n%s", got)
	}
	if err := os.WriteFile(path, []byte("no markers"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := UpdateDoc(path, rep); !errors.Is(err, ErrInvalid) {
		t.Errorf("a document without markers: %v, want ErrInvalid", err)
	}
	if err := os.WriteFile(path, []byte(main.begin+"\nno end\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := UpdateDoc(path, rep); !errors.Is(err, ErrInvalid) {
		t.Errorf("a section without its end: %v, want ErrInvalid", err)
	}

	// What WriteJSON wrote, ReadReport reads back whole; a scenario this
	// build does not know is refused.
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := ReadReport(bytes.NewReader(buf.Bytes()))
	if err != nil || !reflect.DeepEqual(back, rep) {
		t.Errorf("ReadReport(WriteJSON(rep)) = %+v, %v; want %+v", back, err, rep)
	}
	bad := strings.Replace(buf.String(), `"scenario": 6`, `"scenario": 99`, 1)
	if _, err := ReadReport(strings.NewReader(bad)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "99") {
		t.Errorf("ReadReport of an unknown scenario: %v", err)
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
// overlap (the fault's, so expected under MX) and a stale write, refused
// by the fenced register once the new holder has shown its token; its loss
// came after the next grant.
func TestCheckPausedHolder(t *testing.T) {
	tr, fa := boolp(true), boolp(false)
	evs := []Event{
		{T: 10, Client: 1, Op: OpAcquire, Phase: OK, Token: 5},
		{T: 20, Client: 1, Op: OpSeen, Phase: OK, Token: 5},
		{T: 25, Client: 1, Token: 5, Op: OpFault, Phase: Invoke, Fault: "pause"},
		{T: 100, Client: 2, Op: OpAcquire, Phase: OK, Token: 6},
		{T: 110, Client: 2, Op: OpSeen, Phase: OK, Token: 6},
		{T: 120, Client: 2, Op: OpApply, Register: "unfenced", Token: 6, Accepted: tr},
		{T: 120, Client: 2, Op: OpApply, Register: "fenced", Token: 6, Accepted: tr},
		{T: 130, Client: 2, Op: OpRelease, Phase: Invoke, Token: 6},
		{T: 140, Client: 1, Token: 5, Op: OpFault, Phase: OK, Fault: "pause"},
		{T: 145, Client: 1, Op: OpLost, Phase: OK, Token: 5},
		{T: 150, Client: 1, Op: OpApply, Register: "unfenced", Token: 5, Accepted: tr},
		{T: 150, Client: 1, Op: OpApply, Register: "fenced", Token: 5, Accepted: fa},
	}
	r := Result{Expected: MX}
	check(&r, evs, ResourceState{AppliedUnfenced: 2, Unfenced: 1, AppliedFenced: 1, Fenced: 1}, time.Second)
	if r.Overlaps != 1 || r.OverlapTime != 30 || r.StaleUnfenced != 1 || r.StaleFencedRejected != 1 ||
		r.StaleFencedAccepted != 0 || r.LateDone != 1 || r.LateDoneMax != 45 || r.LostUnfenced != 1 ||
		r.LostFenced != 0 || r.Detect != 120 || r.Recover != 75 || r.Faults != 1 || r.Ops != 2 || len(r.Problems) != 0 {
		t.Errorf("check: %+v", r)
	}
	if v := verdict(&r, true); v != "ok" {
		t.Errorf("verdict %q, want ok", v)
	}

	// The same overlap where no fault was aimed is a violation.
	r = Result{Expected: MX}
	unfaulted := slices.DeleteFunc(slices.Clone(evs), func(e Event) bool { return e.Op == OpFault })
	check(&r, unfaulted, ResourceState{}, time.Second)
	if v := verdict(&r, true); !strings.Contains(v, "held at once") || !strings.Contains(v, "no fault injected") {
		t.Errorf("verdict on an overlap no fault explains: %q", v)
	}

	// Under DET the overlap and the late Done both fail.
	r = Result{Expected: DET}
	check(&r, evs, ResourceState{}, time.Second)
	if v := verdict(&r, true); !strings.Contains(v, "held at once") || !strings.Contains(v, "after the next grant") {
		t.Errorf("DET verdict on an overlap: %q", v)
	}

	// A stale write the fenced register took after the new holder's
	// contact is a fencing failure; before it (the new holder's read and
	// write both came after), fencing could not know.
	for _, c := range []struct {
		seenAt int64
		want   string
	}{{110, "fencing let 1 stale writes through"}, {160, ""}} {
		evs2 := slices.Clone(evs)
		evs2[4].T = c.seenAt
		if c.seenAt > 150 {
			evs2[5].T, evs2[6].T = c.seenAt+5, c.seenAt+5
		}
		evs2[len(evs2)-1].Accepted = tr
		slices.SortStableFunc(evs2, func(a, b Event) int { return int(a.T - b.T) })
		r = Result{Expected: MX}
		check(&r, evs2, ResourceState{}, time.Second)
		v := verdict(&r, true)
		if c.want != "" && !strings.Contains(v, c.want) || c.want == "" && (v != "ok" || r.StaleBeforeContact != 1) {
			t.Errorf("fenced write accepted, contact at %d: verdict %q, %+v", c.seenAt, v, r)
		}
	}
}

// A fault that did not bite, a Done that never closed, a lock that came
// free late, and tokens out of grant order are each reported.
func TestCheckFaultEvidence(t *testing.T) {
	grant := func(t int64, c int, tok uint64) Event {
		return Event{T: t, Client: c, Op: OpAcquire, Phase: OK, Token: tok}
	}
	fault := func(t int64, kind string, c int, tok uint64, phase string) Event {
		return Event{T: t, Client: c, Token: tok, Op: OpFault, Phase: phase, Fault: kind}
	}
	rel := func(t int64, c int, tok uint64) Event {
		return Event{T: t, Client: c, Op: OpRelease, Phase: Invoke, Token: tok}
	}
	sec := int64(time.Second)
	for _, c := range []struct {
		name   string
		expect Outcome
		evs    []Event
		want   string
	}{
		{"pause that did not bite", MX, []Event{grant(1, 1, 5), fault(2, "pause", 1, 5, Invoke), fault(3, "pause", 1, 5, OK),
			rel(4, 1, 5), grant(5, 2, 6)}, "did not bite"},
		{"cut without Done", DET, []Event{grant(1, 1, 5), fault(2, "blackhole", 1, 5, Invoke), rel(4, 1, 5), grant(5, 2, 6),
			fault(6, "blackhole", 1, 5, OK)}, "Done never closed"},
		{"nobody else granted", DET, []Event{grant(1, 1, 5), fault(2, "blackhole", 1, 5, Invoke),
			fault(6, "blackhole", 1, 5, OK)}, "nobody else was granted"},
		{"crash freed late", SAFE, []Event{grant(1, 1, 5), fault(2, "crash", 1, 5, Invoke), {T: 3, Client: 1, Op: OpExit},
			grant(2+7*sec, 2, 6)}, "came free after 7s"},
		{"tokens backwards", SAFE, []Event{grant(1, 1, 5), fault(2, "crash", 1, 5, Invoke), {T: 3, Client: 1, Op: OpExit},
			grant(4, 2, 4)}, "lock model: illegal"},
	} {
		r := Result{Expected: c.expect}
		check(&r, c.evs, ResourceState{}, time.Second)
		if v := verdict(&r, true); !strings.Contains(v, c.want) {
			t.Errorf("%s: verdict %q, want %q", c.name, v, c.want)
		}
	}
}

// The lock model: tokens must rise in some order the calls allow, and a
// release that succeeds must be the current holder's. Each case is a
// mutation of a legal history that the model must catch, or a reordering
// that answer order would wrongly flag.
func TestCheckLockModel(t *testing.T) {
	call := func(t int64, c int, op string, tok uint64) Event {
		return Event{T: t, Client: c, Op: op, Phase: Invoke, Token: tok}
	}
	ret := func(t int64, c int, op, phase string, tok uint64) Event {
		return Event{T: t, Client: c, Op: op, Phase: phase, Token: tok}
	}
	for _, c := range []struct {
		name string
		evs  []Event
		want string
	}{
		{"sequential", []Event{call(1, 1, OpAcquire, 0), ret(2, 1, OpAcquire, OK, 5), call(3, 1, OpRelease, 5),
			ret(4, 1, OpRelease, OK, 5), call(5, 2, OpAcquire, 0), ret(6, 2, OpAcquire, OK, 6)}, "ok"},
		// Answered in the other order, but the calls overlap: 5 may have
		// taken effect first. TokenOrder counts it; the model does not.
		{"concurrent grants answered out of order", []Event{call(1, 1, OpAcquire, 0), call(2, 2, OpAcquire, 0),
			ret(3, 2, OpAcquire, OK, 6), ret(4, 1, OpAcquire, OK, 5)}, "ok"},
		{"token reused", []Event{call(1, 1, OpAcquire, 0), ret(2, 1, OpAcquire, OK, 5), call(3, 2, OpAcquire, 0),
			ret(4, 2, OpAcquire, OK, 5)}, "illegal"},
		{"token went back", []Event{call(1, 1, OpAcquire, 0), ret(2, 1, OpAcquire, OK, 5), call(3, 2, OpAcquire, 0),
			ret(4, 2, OpAcquire, OK, 4)}, "illegal"},
		// Client 1's lease lapsed and client 2 holds: client 1's release
		// cannot have succeeded.
		{"release of a superseded hold", []Event{call(1, 1, OpAcquire, 0), ret(2, 1, OpAcquire, OK, 5),
			call(3, 2, OpAcquire, 0), ret(4, 2, OpAcquire, OK, 6), call(5, 1, OpRelease, 5), ret(6, 1, OpRelease, OK, 5)}, "illegal"},
		// The same release, called before client 2's grant (a retried
		// release whose first try took effect): legal.
		{"release called before the next grant", []Event{call(1, 1, OpAcquire, 0), ret(2, 1, OpAcquire, OK, 5),
			call(3, 1, OpRelease, 5), call(4, 2, OpAcquire, 0), ret(5, 2, OpAcquire, OK, 6), ret(6, 1, OpRelease, OK, 5)}, "ok"},
		{"released twice", []Event{call(1, 1, OpAcquire, 0), ret(2, 1, OpAcquire, OK, 5), call(3, 1, OpRelease, 5),
			ret(4, 1, OpRelease, OK, 5), call(5, 1, OpRelease, 5), ret(6, 1, OpRelease, OK, 5)}, "illegal"},
		// Unanswered and failed ops constrain nothing.
		{"ambiguous and failed", []Event{call(1, 1, OpAcquire, 0), ret(2, 1, OpAcquire, Info, 0), call(3, 2, OpAcquire, 0),
			ret(4, 2, OpAcquire, OK, 6), call(5, 1, OpRelease, 5), ret(6, 1, OpRelease, Fail, 5), call(7, 3, OpAcquire, 0)}, "ok"},
	} {
		got, lin := checkTokens(c.evs)
		if got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
			continue
		}
		if got != "illegal" {
			continue
		}
		path := filepath.Join(t.TempDir(), "lin.html")
		evs := append(slices.Clone(c.evs), Event{T: 3, Client: 1, Op: OpFault, Phase: Invoke, Fault: "pause", Token: 5})
		if err := writeVisual(path, evs, lin); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(path); err != nil || !bytes.Contains(b, []byte("acquire")) || !bytes.Contains(b, []byte("pause")) {
			t.Errorf("%s: visualisation lacks the ops or the fault (%v)", c.name, err)
		}
	}
}

// A client granted the same token twice (RedLock's token is the highest of
// per-master counters) has its events read against the hold they came in:
// a loss and a write in its second hold, with no grant since, are neither
// late nor stale, though the first hold had a successor.
func TestCheckRepeatedToken(t *testing.T) {
	tr := boolp(true)
	evs := []Event{
		{T: 10, Client: 1, Op: OpAcquire, Phase: OK, Token: 24},
		{T: 20, Client: 1, Op: OpRelease, Phase: Invoke, Token: 24},
		{T: 30, Client: 2, Op: OpAcquire, Phase: OK, Token: 22},
		{T: 40, Client: 2, Op: OpRelease, Phase: Invoke, Token: 22},
		{T: 50, Client: 1, Op: OpAcquire, Phase: OK, Token: 24},
		{T: 55, Client: 1, Op: OpSeen, Phase: OK, Token: 24},
		{T: 60, Client: 1, Op: OpApply, Register: "unfenced", Token: 24, Accepted: tr},
		{T: 60, Client: 1, Op: OpApply, Register: "fenced", Token: 24, Accepted: tr},
		{T: 70, Client: 1, Op: OpLost, Phase: OK, Token: 24},
	}
	r := Result{Expected: UNSAFEorSAFE}
	check(&r, evs, ResourceState{AppliedUnfenced: 1, Unfenced: 1, AppliedFenced: 1, Fenced: 1}, time.Second)
	if r.LateDone != 0 || r.StaleUnfenced != 0 || r.StaleFencedAccepted != 0 || r.StaleBeforeContact != 0 {
		t.Errorf("events of the second hold read against the first: %+v", r)
	}
}

// A write (or check) the resource applied under a token that no grant of
// its client on its name carries is a problem: a worker logs its grant
// before it sends anything under it, so the write was neither stale nor
// fresh for the checker, and would otherwise count as neither.
func TestCheckWriteOfNoHold(t *testing.T) {
	tr := boolp(true)
	good := []Event{
		{T: 10, Client: 1, Op: OpAcquire, Phase: OK, Token: 5, Name: "hot"},
		{T: 20, Client: 1, Op: OpApply, Register: "unfenced", Token: 5, Name: "hot", Accepted: tr},
		{T: 20, Client: 1, Op: OpApply, Register: "fenced", Token: 5, Name: "hot", Accepted: tr},
		{T: 30, Client: 1, Op: OpRelease, Phase: Invoke, Token: 5, Name: "hot"},
	}
	for _, c := range []struct {
		name string
		edit func(e *Event)
		want string
	}{
		{"its own hold's", func(*Event) {}, ""},
		{"another token", func(e *Event) { e.Token = 6 }, "client 1's write with token 6 on \"hot\", which no grant of it carries"},
		{"another client", func(e *Event) { e.Client = 2 }, "client 2's write with token 5 on \"hot\", which no grant of it carries"},
		{"another name", func(e *Event) { e.Name = "cold" }, "client 1's write with token 5 on \"cold\", which no grant of it carries"},
	} {
		evs := slices.Clone(good)
		c.edit(&evs[1])
		c.edit(&evs[2])
		r := Result{Expected: SAFE, Faults: 1}
		check(&r, evs, ResourceState{AppliedUnfenced: 1, Unfenced: 1, AppliedFenced: 1, Fenced: 1}, time.Second)
		v := verdict(&r, true)
		if c.want == "" && v != "ok" || c.want != "" && (!strings.Contains(v, c.want) || strings.Count(v, "no grant") != 1) {
			t.Errorf("%s: verdict %q, want %q (once)", c.name, v, c.want)
		}
	}
}
