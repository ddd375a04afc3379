package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/padlock-go/padlock"
)

// supportsElections reports whether the backend runs elections. Where it
// does not, it checks that Campaign and Leader say so (ErrUnsupported) and
// leave nothing behind, and the subtest ends there.
func supportsElections(e *env, l *padlock.Locker) bool {
	e.Helper()
	if e.caps.Elections {
		return true
	}
	el := l.Election(e.name("u"))
	if ld, err := el.Campaign(e.ctx, "v"); !errors.Is(err, padlock.ErrUnsupported) {
		if ld != nil {
			ld.Resign(e.ctx)
		}
		e.Fatalf("Campaign on a backend without Elections = %v, want ErrUnsupported", err)
	}
	if _, err := el.Leader(e.ctx); !errors.Is(err, padlock.ErrUnsupported) {
		e.Fatalf("Leader on a backend without Elections = %v, want ErrUnsupported", err)
	}
	e.stateLen(0)
	return false
}

// campaign campaigns on l, failing the test if it cannot.
func (e *env) campaign(l *padlock.Locker, name, value string, opts ...padlock.Option) *padlock.Leadership {
	e.Helper()
	ld, err := l.Election(name).Campaign(e.ctx, value, opts...)
	if err != nil {
		e.Fatalf("Campaign(%q, %q): %v", name, value, err)
	}
	return ld
}

// leaderIs checks what Leader reports now.
func (e *env) leaderIs(l *padlock.Locker, name string, want padlock.Leader) {
	e.Helper()
	got, err := l.Election(name).Leader(e.ctx)
	if want == (padlock.Leader{}) {
		if !errors.Is(err, padlock.ErrNoLeader) {
			e.Fatalf("Leader(%q) = %+v, %v; want ErrNoLeader", name, got, err)
		}
		return
	}
	if err != nil || got != want {
		e.Fatalf("Leader(%q) = %+v, %v; want %+v", name, got, err, want)
	}
}

// testElectionTerms walks an election through two terms: the leader is
// read back with its value and token, a proclaimed value replaces it, a
// second candidate waits and is elected when the first resigns, with a
// greater token, and a deposed leader's Proclaim and Resign change nothing
// (ErrNotHeld).
func testElectionTerms(e *env) {
	a, b, c := e.locker(), e.locker(), e.locker()
	if !supportsElections(e, a) {
		return
	}
	name := e.name("e")
	e.leaderIs(c, name, padlock.Leader{})
	first := e.campaign(a, name, "a:1")
	e.leaderIs(c, name, padlock.Leader{Value: "a:1", Token: first.Token()})
	if err := first.Proclaim(e.ctx, "a:2"); err != nil {
		e.Fatalf("Proclaim: %v", err)
	}
	e.leaderIs(c, name, padlock.Leader{Value: "a:2", Token: first.Token()})

	res := make(chan error, 1)
	var second *padlock.Leadership
	opt, proof := waitProof()
	go func() {
		var err error
		second, err = b.Election(name).Campaign(e.ctx, "b:1", opt)
		res <- err
	}()
	e.awaitWaiting(b, proof, 2)
	select {
	case err := <-res:
		e.Fatalf("a second candidate was elected while the first leads: %v", err)
	default:
	}
	if err := first.Resign(e.ctx); err != nil {
		e.Fatalf("Resign: %v", err)
	}
	if err := <-res; err != nil {
		e.Fatalf("second candidate's Campaign: %v", err)
	}
	if e.caps.MonotonicTokens && second.Token() <= first.Token() {
		e.Errorf("second term's token %d is not above the first's %d", second.Token(), first.Token())
	}
	e.leaderIs(c, name, padlock.Leader{Value: "b:1", Token: second.Token()})
	if err := first.Proclaim(e.ctx, "a:3"); !errors.Is(err, padlock.ErrNotHeld) {
		e.Errorf("a deposed leader's Proclaim = %v, want ErrNotHeld", err)
	}
	if err := first.Resign(e.ctx); !errors.Is(err, padlock.ErrNotHeld) {
		e.Errorf("a deposed leader's Resign = %v, want ErrNotHeld", err)
	}
	e.leaderIs(c, name, padlock.Leader{Value: "b:1", Token: second.Token()})
	if err := second.Resign(e.ctx); err != nil {
		e.Fatalf("Resign: %v", err)
	}
	e.leaderIs(c, name, padlock.Leader{})
}

// testElectionFIFO: where the backend queues (FairFIFO), candidates are
// elected in arrival order, each shown waiting before the next campaigns;
// each term's token is above the last.
func testElectionFIFO(e *env) {
	a := e.locker()
	if !supportsElections(e, a) {
		return
	}
	if !e.caps.FairFIFO {
		e.Skip("backend is not fair (Capabilities.FairFIFO is false)")
	}
	const candidates = 4
	name := e.name("ef")
	first := e.campaign(a, name, "first")
	type term struct {
		i     int
		token uint64
	}
	order := make(chan term, candidates)
	errs := make(chan error, candidates)
	for i := range candidates {
		l := e.locker()
		opt, proof := waitProof()
		go func() {
			ld, err := l.Election(name).Campaign(e.ctx, fmt.Sprint("c", i), opt)
			if err != nil {
				errs <- err
				return
			}
			order <- term{i, ld.Token()}
			errs <- ld.Resign(e.ctx)
		}()
		e.awaitWaiting(l, proof, i+2) // the leader and i+1 candidates in line
	}
	if err := first.Resign(e.ctx); err != nil {
		e.Fatalf("Resign: %v", err)
	}
	for range candidates {
		if err := <-errs; err != nil {
			e.Fatal(err)
		}
	}
	last := first.Token()
	for want := range candidates {
		got := <-order
		if got.i != want {
			e.Fatalf("candidate %d elected in place %d: not in arrival order", got.i, want)
		}
		if e.caps.MonotonicTokens && got.token <= last {
			e.Errorf("term %d's token %d is not above the previous term's %d", want, got.token, last)
		}
		last = got.token
	}
	e.leaderIs(a, name, padlock.Leader{})
}

// testElectionOneLeader runs candidates on several Lockers through many
// terms: a counter in the test shows at most one leader at a time, and
// each term's token is above the last.
func testElectionOneLeader(e *env) {
	const lockers, candidates, terms = 3, 2, 4
	ls := e.lockersN(lockers)
	if !supportsElections(e, ls[0]) {
		return
	}
	name := e.name("o")
	var (
		leaders atomic.Int64
		last    atomic.Uint64
		wg      sync.WaitGroup
		fails   failures
	)
	for i, l := range ls {
		for c := range candidates {
			wg.Go(func() {
				for t := range terms {
					ld, err := l.Election(name).Campaign(e.ctx, fmt.Sprintf("%d/%d/%d", i, c, t))
					if err != nil {
						fails.add(err)
						return
					}
					if n := leaders.Add(1); n != 1 {
						fails.add(fmt.Errorf("%d leaders at once", n))
					}
					if prev := last.Swap(ld.Token()); e.caps.MonotonicTokens && ld.Token() <= prev {
						fails.add(fmt.Errorf("term token %d after %d", ld.Token(), prev))
					}
					leaders.Add(-1)
					if err := ld.Resign(e.ctx); err != nil {
						fails.add(err)
					}
				}
			})
		}
	}
	wg.Wait()
	fails.report(e)
}

// testElectionCancel cancels a waiting campaign and lets another run out
// of its wait: each returns its context's error and leaves no candidacy.
func testElectionCancel(e *env) {
	a, b, c := e.locker(), e.locker(), e.locker()
	if !supportsElections(e, a) {
		return
	}
	name := e.name("c")
	ld := e.campaign(a, name, "a")
	ctx, cancel := context.WithCancel(e.ctx)
	res := make(chan error, 1)
	opt, proof := waitProof()
	go func() {
		l, err := b.Election(name).Campaign(ctx, "b", opt)
		if err == nil {
			l.Resign(e.ctx)
		}
		res <- err
	}()
	e.awaitWaiting(b, proof, 2)
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		e.Fatalf("cancelled Campaign = %v, want context.Canceled", err)
	}
	if _, err := c.Election(name).Campaign(e.ctx, "c", padlock.WithWait(time.Second)); !errors.Is(err, padlock.ErrTimeout) {
		e.Fatalf("Campaign bounded by WithWait while another leads = %v, want ErrTimeout", err)
	}
	e.stateLen(1) // the leader only
	e.leaderIs(c, name, padlock.Leader{Value: "a", Token: ld.Token()})
	if err := ld.Resign(e.ctx); err != nil {
		e.Fatal(err)
	}
}

// testElectionInput checks the election's input errors.
func testElectionInput(e *env) {
	a := e.locker()
	if !supportsElections(e, a) {
		return
	}
	if _, err := a.Election("").Campaign(e.ctx, "v"); !errors.Is(err, padlock.ErrInvalidName) {
		e.Errorf("Campaign on an empty name = %v, want ErrInvalidName", err)
	}
	if _, err := a.Election("").Leader(e.ctx); !errors.Is(err, padlock.ErrInvalidName) {
		e.Errorf("Leader of an empty name = %v, want ErrInvalidName", err)
	}
	name := e.name("i")
	if _, err := a.Election(name).Campaign(e.ctx, strings.Repeat("v", padlock.MaxValueLen+1)); !errors.Is(err, padlock.ErrInvalidOption) {
		e.Errorf("Campaign with a value over MaxValueLen = %v, want ErrInvalidOption", err)
	}
	if _, err := a.Election(name).Campaign(e.ctx, "v", padlock.WithLimit(2)); !errors.Is(err, padlock.ErrInvalidOption) {
		e.Errorf("Campaign with a limit = %v, want ErrInvalidOption", err)
	}
	long := strings.Repeat("v", padlock.MaxValueLen)
	ld := e.campaign(a, name, long)
	e.leaderIs(a, name, padlock.Leader{Value: long, Token: ld.Token()})
	if err := ld.Proclaim(e.ctx, long+"v"); !errors.Is(err, padlock.ErrInvalidOption) {
		e.Errorf("Proclaim of a value over MaxValueLen = %v, want ErrInvalidOption", err)
	}
	if err := ld.Resign(e.ctx); err != nil {
		e.Fatal(err)
	}
	e.stateLen(0)
}

// testElectionLeaderKilled kills the leader's client: a waiting candidate
// is elected within the TTL and slack, with a greater token.
func testElectionLeaderKilled(e *env) {
	k := need[Killer](e, FeatureKill)
	a, b := e.locker(), e.locker()
	if !supportsElections(e, a) {
		return
	}
	name := e.name("k")
	dead := e.campaign(a, name, "a")
	e.injected(FeatureKill, k.Kill(e.ctx, a))
	start := time.Now()
	ld, err := b.Election(name).Campaign(e.ctx, "b", padlock.WithWait(e.ttl+5*time.Second))
	if err != nil {
		e.Fatalf("after the leader's client died, Campaign = %v (waited %v)", err, time.Since(start))
	}
	if e.caps.MonotonicTokens && ld.Token() <= dead.Token() {
		e.Errorf("successor's token %d after the dead leader's %d", ld.Token(), dead.Token())
	}
	e.leaderIs(b, name, padlock.Leader{Value: "b", Token: ld.Token()})
	if err := ld.Resign(e.ctx); err != nil {
		e.Fatal(err)
	}
}

// testElectionLeaderCut cuts the leader off: its Done closes, with
// ErrLost, before the waiting candidate's Campaign returns, and afterwards
// its Proclaim changes nothing.
func testElectionLeaderCut(e *env) {
	c := need[Cutter](e, FeatureCut)
	electionLoss(e, FeatureCut, c.Cut)
}

// testElectionLeaderSilenced makes the server silent to the leader (a
// pause or a silent partition, seen from the leader): after it is healed,
// its Done has closed with ErrLost, its Proclaim changes nothing, and the
// successor's value stands.
func testElectionLeaderSilenced(e *env) {
	bh := need[Blackholer](e, FeatureBlackhole)
	electionLoss(e, FeatureBlackhole, bh.Blackhole)
}

func electionLoss(e *env, what Feature, cut func(context.Context, *padlock.Locker) (func() error, error)) {
	a, b, c := e.locker(), e.locker(), e.locker()
	if !supportsElections(e, a) {
		return
	}
	name := e.name("l")
	old := e.campaign(a, name, "old")
	restore, err := cut(e.ctx, a)
	e.injected(what, err)
	healed := false
	heal := func() {
		if !healed {
			healed = true
			if err := restore(); err != nil {
				e.Errorf("restore: %v", err)
			}
		}
	}
	defer heal()
	successor, err := b.Election(name).Campaign(e.ctx, "new", padlock.WithWait(2*e.ttl+10*time.Second))
	if err != nil {
		e.Fatalf("Campaign after the leader was cut off: %v", err)
	}
	defer successor.Resign(e.ctx)
	if isOpen(old.Done()) && e.caps.DoneBeforeRegrant {
		e.Fatalf("a successor was elected while the old leader's Done is still open")
	}
	heal()
	select {
	case <-old.Done():
	case <-time.After(e.ttl + 10*time.Second):
		e.Fatalf("the old leader's Done is still open after the cut")
	}
	if !errors.Is(old.Err(), padlock.ErrLost) {
		e.Errorf("the old leader's Err = %v, want ErrLost", old.Err())
	}
	if err := old.Proclaim(e.ctx, "old again"); !errors.Is(err, padlock.ErrNotHeld) {
		e.Errorf("the deposed leader's Proclaim = %v, want ErrNotHeld", err)
	}
	e.leaderIs(c, name, padlock.Leader{Value: "new", Token: successor.Token()})
}

// testObserve watches an election through many terms, each proclaiming
// twice: what Observe sends starts with the state at the call, reports
// each term's last value while it stands, comes in term order (never a
// deposed leader's value after its successor's), ends with no leader once
// the last resigned, and every value it carries was really its term's.
func testObserve(e *env) {
	const terms = 6
	a, b, o := e.locker(), e.locker(), e.locker()
	if !supportsElections(e, a) {
		return
	}
	name := e.name("w")
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	seen := o.Election(name).Observe(ctx)
	if first := <-seen; first != (padlock.Leader{}) {
		e.Fatalf("Observe's first value = %+v, want no leader", first)
	}
	var (
		mu     sync.Mutex
		values = map[string]uint64{} // value → its term's token
		got    []padlock.Leader
		done   = make(chan struct{})
	)
	go func() {
		defer close(done)
		for ld := range seen {
			mu.Lock()
			got = append(got, ld)
			mu.Unlock()
		}
	}()
	ls := []*padlock.Locker{a, b}
	for t := range terms {
		ld := e.campaign(ls[t%2], name, fmt.Sprintf("t%d-0", t))
		mu.Lock()
		values[fmt.Sprintf("t%d-0", t)] = ld.Token()
		values[fmt.Sprintf("t%d-1", t)] = ld.Token()
		mu.Unlock()
		if err := ld.Proclaim(e.ctx, fmt.Sprintf("t%d-1", t)); err != nil {
			e.Fatalf("Proclaim: %v", err)
		}
		// Each term's last value must reach the observer while it stands
		// (by push, or by the poll within a third of the TTL).
		want := padlock.Leader{Value: fmt.Sprintf("t%d-1", t), Token: ld.Token()}
		WaitFor(e.ctx, e.T, fmt.Sprintf("Observe to report %+v", want), e.ttl+10*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) > 0 && got[len(got)-1] == want
		})
		if err := ld.Resign(e.ctx); err != nil {
			e.Fatalf("Resign: %v", err)
		}
	}
	// The last state, no leader, must arrive within a TTL (and slack).
	lastIsNone := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0 && got[len(got)-1] == (padlock.Leader{})
	}
	WaitFor(e.ctx, e.T, "Observe to report no leader after the last resignation", e.ttl+10*time.Second, lastIsNone)
	cancel()
	<-done
	var term uint64
	for i, ld := range got {
		if ld == (padlock.Leader{}) {
			continue
		}
		tok, ok := values[ld.Value]
		if !ok || tok != ld.Token {
			e.Errorf("Observe sent %+v, which no term proclaimed (sent: %+v)", ld, got)
			continue
		}
		if e.caps.MonotonicTokens && ld.Token < term {
			e.Errorf("Observe sent term %d after term %d (position %d of %+v)", ld.Token, term, i, got)
		}
		term = max(term, ld.Token)
	}
	e.Logf("Observe sent %d states for %d terms of two values each", len(got), terms)
}
