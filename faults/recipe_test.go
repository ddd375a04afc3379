package faults

import (
	"strings"
	"testing"
	"time"
)

// Synthetic histories of the recipes: each invariant holds on a legal
// history and is reported when broken.

func grantOf(t int64, c int, kind Kind, name string, tok uint64) Event {
	return Event{T: t, Client: c, Op: OpAcquire, Phase: OK, Token: tok, Kind: kind, Name: name}
}

func releaseOf(t int64, c int, kind Kind, name string, tok uint64) Event {
	return Event{T: t, Client: c, Op: OpRelease, Phase: Invoke, Token: tok, Kind: kind, Name: name}
}

func applyOf(t int64, c int, kind Kind, name string, tok uint64, register string, accepted bool) Event {
	return Event{T: t, Client: c, Op: OpApply, Phase: OK, Token: tok, Kind: kind, Name: name, Register: register,
		Accepted: boolp(accepted), Check: !kind.writes()}
}

// judge is the verdict on r, whose history may have no fault in it (the
// invariants are the question here, not the faults' evidence).
func judge(r *Result) string {
	r.Faults = max(r.Faults, 1)
	return verdict(r, true)
}

// A writer beside a reader is an overlap (SAFE does not allow it); two
// readers side by side are not, and a run without them is a problem.
func TestCheckReaders(t *testing.T) {
	shared := []Event{grantOf(1, 1, Reader, "hot", 5), grantOf(2, 2, Reader, "hot", 6), releaseOf(3, 1, Reader, "hot", 5),
		releaseOf(4, 2, Reader, "hot", 6), grantOf(5, 3, Writer, "hot", 7), releaseOf(6, 3, Writer, "hot", 7)}
	r := Result{Expected: SAFE}
	check(&r, shared, ResourceState{}, time.Second)
	if v := judge(&r); v != "ok" || r.Overlaps != 0 || r.Shared != 2 {
		t.Errorf("two readers at once, then a writer: verdict %q, overlaps %d, shared %d", v, r.Overlaps, r.Shared)
	}

	beside := []Event{grantOf(1, 1, Reader, "hot", 5), grantOf(2, 2, Reader, "hot", 6), grantOf(3, 3, Writer, "hot", 7),
		releaseOf(4, 1, Reader, "hot", 5), releaseOf(5, 2, Reader, "hot", 6), releaseOf(6, 3, Writer, "hot", 7)}
	r = Result{Expected: SAFE}
	check(&r, beside, ResourceState{}, time.Second)
	if v := judge(&r); r.Overlaps != 2 || !strings.Contains(v, "held at once") {
		t.Errorf("a writer beside two readers: verdict %q, overlaps %d", v, r.Overlaps)
	}

	alone := []Event{grantOf(1, 1, Reader, "hot", 5), releaseOf(2, 1, Reader, "hot", 5), grantOf(3, 2, Reader, "hot", 6),
		releaseOf(4, 2, Reader, "hot", 6)}
	r = Result{Expected: SAFE}
	check(&r, alone, ResourceState{}, time.Second)
	if v := judge(&r); !strings.Contains(v, "did not test sharing") {
		t.Errorf("readers one after another: verdict %q", v)
	}

	// A lost reader whose Done closes after another reader's grant is
	// in time; after a writer's, it is late.
	lost := func(t int64, c int, tok uint64) Event {
		return Event{T: t, Client: c, Op: OpLost, Phase: OK, Token: tok, Kind: Reader, Name: "hot"}
	}
	for _, c := range []struct {
		next Kind
		late int
	}{{Reader, 0}, {Writer, 1}} {
		evs := []Event{grantOf(1, 1, Reader, "hot", 5), grantOf(2, 2, Reader, "hot", 6), grantOf(3, 3, c.next, "hot", 7),
			lost(4, 1, 5), releaseOf(5, 2, Reader, "hot", 6), releaseOf(6, 3, c.next, "hot", 7)}
		r = Result{Expected: DET}
		check(&r, evs, ResourceState{}, time.Second)
		if r.LateDone != c.late {
			t.Errorf("a lost reader's Done after a %s's grant: late Done %d, want %d", c.next, r.LateDone, c.late)
		}
	}
}

// n+1 permits at once is an overlap; n is not, and a run that never
// reaches n is a problem.
func TestCheckPermits(t *testing.T) {
	p := func(evs ...Event) []Event { return evs }
	for _, c := range []struct {
		name     string
		evs      []Event
		overlaps int
		want     string
	}{
		{"n at once", p(grantOf(1, 1, Permit, "hot", 5), grantOf(2, 2, Permit, "hot", 6), releaseOf(3, 1, Permit, "hot", 5),
			grantOf(3, 3, Permit, "hot", 7), releaseOf(4, 2, Permit, "hot", 6), releaseOf(5, 3, Permit, "hot", 7)), 0, ""},
		{"n+1 at once", p(grantOf(1, 1, Permit, "hot", 5), grantOf(2, 2, Permit, "hot", 6), grantOf(3, 3, Permit, "hot", 7),
			releaseOf(4, 1, Permit, "hot", 5), releaseOf(5, 2, Permit, "hot", 6), releaseOf(6, 3, Permit, "hot", 7)), 1,
			"more than 2 permits held at once"},
		{"never n", p(grantOf(1, 1, Permit, "hot", 5), releaseOf(2, 1, Permit, "hot", 5), grantOf(3, 2, Permit, "hot", 6),
			releaseOf(4, 2, Permit, "hot", 6)), 0, "did not reach the limit"},
	} {
		r := Result{Expected: SAFE, Limit: 2}
		check(&r, c.evs, ResourceState{}, time.Second)
		v := judge(&r)
		if r.Overlaps != c.overlaps || c.want == "" && v != "ok" || c.want != "" && !strings.Contains(v, c.want) {
			t.Errorf("%s: overlaps %d, verdict %q; want %d, %q", c.name, r.Overlaps, v, c.overlaps, c.want)
		}
	}
	// The crash of one of two permits: the grant that takes its place is
	// the conflicting one, not the grant of a free permit.
	crash := p(grantOf(1, 1, Permit, "hot", 5), Event{T: 2, Client: 1, Token: 5, Op: OpFault, Phase: Invoke, Fault: "crash"},
		Event{T: 2, Client: 1, Op: OpExit}, grantOf(3, 2, Permit, "hot", 6), grantOf(4, 3, Permit, "hot", 7),
		releaseOf(5, 2, Permit, "hot", 6), releaseOf(6, 3, Permit, "hot", 7))
	r := Result{Expected: SAFE, Limit: 2}
	check(&r, crash, ResourceState{}, time.Second)
	if v := judge(&r); v != "ok" || r.Recover != 2 {
		t.Errorf("a crashed permit: verdict %q, recover %v (want 2: the third grant)", v, r.Recover)
	}
}

// Under MX (permit-holder-paused) a paused permit V may be overlapped:
// its lease lapsed, and two others legally took the free permits. But
// the holds no fault was aimed at must still keep the limit: a third
// other let in beside them is a violation while V is open too, and so is
// one beside a stalled holder's late Done.
func TestCheckPermitsBesideTheFaulted(t *testing.T) {
	pause := func(t int64, phase string) Event {
		return Event{T: t, Client: 1, Token: 5, Op: OpFault, Phase: phase, Fault: "pause"}
	}
	ms := int64(time.Millisecond)
	for _, c := range []struct {
		name string
		evs  []Event
		want string // "" for ok
	}{
		{"two others beside the paused holder", []Event{grantOf(0, 1, Permit, "hot", 5), pause(1*ms, Invoke),
			grantOf(2*ms, 2, Permit, "hot", 6), grantOf(3*ms, 3, Permit, "hot", 7), pause(5*ms, OK),
			releaseOf(6*ms, 1, Permit, "hot", 5), releaseOf(7*ms, 2, Permit, "hot", 6), releaseOf(8*ms, 3, Permit, "hot", 7)}, ""},
		{"three others beside the paused holder", []Event{grantOf(0, 1, Permit, "hot", 5), pause(1*ms, Invoke),
			grantOf(2*ms, 2, Permit, "hot", 6), grantOf(3*ms, 3, Permit, "hot", 7), grantOf(4*ms, 4, Permit, "hot", 8), pause(5*ms, OK),
			releaseOf(6*ms, 1, Permit, "hot", 5), releaseOf(7*ms, 2, Permit, "hot", 6), releaseOf(8*ms, 3, Permit, "hot", 7),
			releaseOf(9*ms, 4, Permit, "hot", 8)}, "3 permits held at once by holds no fault or stall explains"},
		// The stretch closes with the faulted hold's own release: the
		// hold that closes it may not excuse the whole of it either.
		{"three others, the paused holder leaving first", []Event{grantOf(0, 1, Permit, "hot", 5), pause(1*ms, Invoke),
			grantOf(2*ms, 2, Permit, "hot", 6), grantOf(3*ms, 3, Permit, "hot", 7), grantOf(4*ms, 4, Permit, "hot", 8),
			releaseOf(5*ms, 4, Permit, "hot", 8), pause(5*ms, OK), releaseOf(6*ms, 1, Permit, "hot", 5),
			releaseOf(7*ms, 2, Permit, "hot", 6), releaseOf(8*ms, 3, Permit, "hot", 7)}, "3 permits held at once by holds no fault or stall explains"},
	} {
		r := Result{Expected: MX, Limit: 2}
		check(&r, c.evs, ResourceState{}, time.Second)
		v := judge(&r)
		if c.want == "" && v != "ok" || c.want != "" && !strings.Contains(v, c.want) {
			t.Errorf("%s: overlaps %d, verdict %q; want %q", c.name, r.Overlaps, v, c.want)
		}
	}

	// A stalled holder (client 1, no fault: its late Done excused by a
	// stall of its process) overlapped by two others is the stall's; by
	// three, the semaphore's.
	stall := Event{T: 1100 * ms, Client: 1, Op: OpStall, Phase: OK, Stall: 1090 * ms}
	lost := Event{T: 1067 * ms, Client: 1, Op: OpLost, Phase: OK, Token: 5, Kind: Permit, Name: "hot"}
	for _, c := range []struct {
		others int
		want   string
	}{{2, ""}, {3, "3 permits held at once by holds no fault or stall explains"}} {
		evs := []Event{grantOf(0, 1, Permit, "hot", 5)}
		for i := range c.others {
			evs = append(evs, grantOf(int64(1000+i)*ms, 2+i, Permit, "hot", uint64(6+i)))
		}
		evs = append(evs, lost, stall)
		for i := range c.others {
			evs = append(evs, releaseOf(int64(1200+i)*ms, 2+i, Permit, "hot", uint64(6+i)))
		}
		r := Result{Expected: MX, Limit: 2}
		check(&r, evs, ResourceState{}, time.Second)
		v := verdict(&r, true) // no fault: "no fault injected" besides
		if r.Stalled != 1 || c.want == "" && strings.Contains(v, "permits held at once") || c.want != "" && !strings.Contains(v, c.want) {
			t.Errorf("a stalled holder beside %d others: stalled %d, overlaps %d, verdict %q; want %q", c.others, r.Stalled, r.Overlaps, v, c.want)
		}
	}
}

// Two multi-locks that share a name may not be held at once; over
// disjoint names they may.
func TestCheckMulti(t *testing.T) {
	two := func(t int64, c int, a, b string, ta, tb uint64, release bool) []Event {
		if release {
			return []Event{releaseOf(t, c, Multi, a, ta), releaseOf(t, c, Multi, b, tb)}
		}
		return []Event{grantOf(t, c, Multi, a, ta), grantOf(t, c, Multi, b, tb)}
	}
	cat := func(parts ...[]Event) (out []Event) {
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	overlapping := cat(two(1, 1, "hot-a", "hot-b", 5, 5, false), two(2, 2, "hot-b", "hot-c", 6, 6, false),
		two(3, 1, "hot-a", "hot-b", 5, 5, true), two(4, 2, "hot-b", "hot-c", 6, 6, true))
	r := Result{Expected: SAFE}
	check(&r, overlapping, ResourceState{}, time.Second)
	if v := judge(&r); r.Overlaps != 1 || !strings.Contains(v, "held at once") {
		t.Errorf("two multi-locks sharing hot-b at once: overlaps %d, verdict %q", r.Overlaps, v)
	}
	disjoint := cat(two(1, 1, "hot-a", "hot-b", 5, 5, false), two(2, 2, "hot-c", "hot-d", 6, 6, false),
		two(3, 1, "hot-a", "hot-b", 5, 5, true), two(4, 2, "hot-c", "hot-d", 6, 6, true))
	r = Result{Expected: SAFE}
	check(&r, disjoint, ResourceState{}, time.Second)
	if v := judge(&r); v != "ok" || r.Overlaps != 0 {
		t.Errorf("two multi-locks over disjoint names: overlaps %d, verdict %q", r.Overlaps, v)
	}
}

// A multi-lock cut off loses one name (its Done closes before the next
// grant of it) and keeps the other until the heal, then releases it: the
// kept name owes no Done, since its next grant came after its release.
// (mysql 304 was marked "Done never closed" for such a history.) The same
// history without the loss, or with the kept name granted to another
// while still held, is a problem.
func TestCheckMultiCutKeepsOneName(t *testing.T) {
	fault := func(t int64, phase string) Event {
		return Event{T: t, Client: 1, Token: 5, Op: OpFault, Phase: phase, Fault: "blackhole"}
	}
	lost := Event{T: 4, Client: 1, Op: OpLost, Phase: OK, Token: 5, Kind: Multi, Name: "hot-b"}
	kept := []Event{grantOf(1, 1, Multi, "hot-b", 5), grantOf(1, 1, Multi, "hot-c", 5), fault(2, Invoke), lost,
		grantOf(5, 2, Multi, "hot-b", 6), fault(6, OK), releaseOf(7, 1, Multi, "hot-c", 5), releaseOf(7, 1, Multi, "hot-b", 5),
		grantOf(8, 3, Multi, "hot-c", 7), releaseOf(9, 2, Multi, "hot-b", 6), releaseOf(9, 3, Multi, "hot-c", 7)}
	r := Result{Expected: DET}
	check(&r, kept, ResourceState{}, time.Second)
	if v := verdict(&r, true); strings.Contains(v, "Done never closed") {
		t.Errorf("a multi-lock that lost one name and released the other before its next grant: verdict %q", v)
	}
	var noLoss []Event
	for _, e := range kept {
		if e.Op != OpLost {
			noLoss = append(noLoss, e)
		}
	}
	r = Result{Expected: DET}
	check(&r, noLoss, ResourceState{}, time.Second)
	if v := verdict(&r, true); !strings.Contains(v, "Done never closed") {
		t.Errorf("a cut multi-lock that lost nothing: verdict %q, want Done never closed", v)
	}
}

// Two leaders' writes accepted in one term (the same token, another
// client), or a write accepted below an accepted one, break fencing; a
// check below a writer's accepted token too. Terms one after another do
// not.
func TestCheckLeadersFencedOrder(t *testing.T) {
	for _, c := range []struct {
		name string
		evs  []Event
		want int
	}{
		{"terms in order", []Event{applyOf(1, 1, Leader, "hot", 5, "fenced", true), applyOf(2, 1, Leader, "hot", 5, "fenced", true),
			applyOf(3, 2, Leader, "hot", 6, "fenced", true), applyOf(4, 1, Leader, "hot", 5, "fenced", false)}, 0},
		{"two leaders in one term", []Event{applyOf(1, 1, Leader, "hot", 5, "fenced", true), applyOf(2, 2, Leader, "hot", 5, "fenced", true),
			applyOf(3, 1, Leader, "hot", 5, "fenced", true)}, 2},
		{"a lower token after a higher", []Event{applyOf(1, 2, Leader, "hot", 6, "fenced", true), applyOf(2, 1, Leader, "hot", 5, "fenced", true)}, 1},
		{"a reader's check below a writer's", []Event{applyOf(1, 2, Writer, "hot", 6, "fenced", true), applyOf(2, 1, Reader, "hot", 5, "fenced", true)}, 1},
		{"readers' checks in any order", []Event{applyOf(1, 1, Reader, "hot", 6, "fenced", true), applyOf(2, 2, Reader, "hot", 5, "fenced", true)}, 0},
		{"names apart", []Event{applyOf(1, 1, Multi, "hot-a", 6, "fenced", true), applyOf(2, 2, Multi, "hot-b", 5, "fenced", true)}, 0},
	} {
		if got := fencedOrder(c.evs); got != c.want {
			t.Errorf("%s: %d out of token order, want %d", c.name, got, c.want)
		}
	}
	// In a cell: the leaders' terms overlap, and their writes in one term
	// break fencing even where the overlap is the fault's.
	evs := []Event{grantOf(1, 1, Leader, "hot", 5), {T: 2, Client: 1, Token: 5, Op: OpFault, Phase: Invoke, Fault: "pause"},
		grantOf(3, 2, Leader, "hot", 5), applyOf(4, 2, Leader, "hot", 5, "fenced", true), {T: 5, Client: 1, Token: 5, Op: OpFault, Phase: OK, Fault: "pause"},
		applyOf(6, 1, Leader, "hot", 5, "fenced", true), releaseOf(7, 1, Leader, "hot", 5), releaseOf(8, 2, Leader, "hot", 5)}
	r := Result{Expected: MX}
	check(&r, evs, ResourceState{}, time.Second)
	if v := judge(&r); r.FencedOrder != 1 || !strings.Contains(v, "accepted out of token order") {
		t.Errorf("two leaders' writes in one term: fenced order %d, verdict %q", r.FencedOrder, v)
	}
}

// The lock model with shared holds: readers' and permits' releases are
// their own; a writer's grant ends every earlier hold.
func TestCheckSharedModel(t *testing.T) {
	call := func(t int64, c int, op string, kind Kind, tok uint64) Event {
		return Event{T: t, Client: c, Op: op, Phase: Invoke, Token: tok, Kind: kind, Name: "hot"}
	}
	ret := func(t int64, c int, op string, kind Kind, tok uint64) Event {
		return Event{T: t, Client: c, Op: op, Phase: OK, Token: tok, Kind: kind, Name: "hot"}
	}
	for _, c := range []struct {
		name string
		evs  []Event
		want string
	}{
		{"two readers release in any order", []Event{call(1, 1, OpAcquire, Reader, 0), ret(2, 1, OpAcquire, Reader, 5),
			call(3, 2, OpAcquire, Reader, 0), ret(4, 2, OpAcquire, Reader, 6), call(5, 1, OpRelease, Reader, 5),
			ret(6, 1, OpRelease, Reader, 5), call(7, 2, OpRelease, Reader, 6), ret(8, 2, OpRelease, Reader, 6)}, "ok"},
		{"a reader's release after a writer's grant", []Event{call(1, 1, OpAcquire, Reader, 0), ret(2, 1, OpAcquire, Reader, 5),
			call(3, 2, OpAcquire, Writer, 0), ret(4, 2, OpAcquire, Writer, 6), call(5, 1, OpRelease, Reader, 5),
			ret(6, 1, OpRelease, Reader, 5)}, "illegal"},
		{"a reader's token below the one before", []Event{call(1, 1, OpAcquire, Reader, 0), ret(2, 1, OpAcquire, Reader, 6),
			call(3, 2, OpAcquire, Reader, 0), ret(4, 2, OpAcquire, Reader, 5)}, "illegal"},
	} {
		if got, _ := checkTokens(c.evs); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
