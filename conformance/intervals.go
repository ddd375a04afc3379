package conformance

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// holdLog records, for the stress subtests, when each hold was held on this
// process's monotonic clock: from its acquisition's return to its Unlock's
// call. A correct lock's next holder of a name returns from its
// acquisition only after the previous holder's Unlock was called (the
// release is sent after that call, and the grant comes after the
// release), so a writer's interval that overlaps any other interval of
// its name is two holders at once, however short the overlap; a counter
// of holders inside sees an overlap only while both are inside its few
// instructions.
type holdLog struct {
	mu    sync.Mutex
	spans map[string][]heldSpan
}

type heldSpan struct {
	from, to time.Time
	shared   bool
	token    uint64
}

// held records a hold of name acquired at from (when its acquisition
// returned) and released now (its Unlock is about to be called).
func (l *holdLog) held(name string, from time.Time, shared bool, token uint64) {
	to := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.spans == nil {
		l.spans = map[string][]heldSpan{}
	}
	l.spans[name] = append(l.spans[name], heldSpan{from: from, to: to, shared: shared, token: token})
}

// overlaps returns every pair of a name's holds that overlapped where one
// of them was not shared: a writer with anyone.
func (l *holdLog) overlaps() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for name, spans := range l.spans {
		spans = slices.Clone(spans)
		slices.SortFunc(spans, func(a, b heldSpan) int { return a.from.Compare(b.from) })
		var open []heldSpan // holds not yet ended at the current one's start
		for _, s := range spans {
			open = slices.DeleteFunc(open, func(o heldSpan) bool { return !o.to.After(s.from) })
			for _, o := range open {
				if !o.shared || !s.shared {
					out = append(out, fmt.Sprintf("%q: token %d (shared %v) held from %v until %v after token %d (shared %v) was granted",
						name, o.token, o.shared, s.from.Sub(o.from).Round(time.Microsecond), o.to.Sub(o.from).Round(time.Microsecond), s.token, s.shared))
				}
			}
			open = append(open, s)
		}
	}
	return out
}

// check fails e for each overlap (at most a few are listed).
func (l *holdLog) check(e *env) {
	e.Helper()
	over := l.overlaps()
	if len(over) > 0 {
		e.Errorf("%d overlapping holds, a writer with another holder (acquisition's return to Unlock's call), e.g.:\n%v", len(over), over[:min(len(over), 5)])
	}
}

// work stands for a critical section's work: a millisecond or three, so
// that a holder granted too early finds the one before it still inside.
func work() { time.Sleep(time.Duration(1+rand.IntN(3)) * time.Millisecond) }
