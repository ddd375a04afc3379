package conformance

import (
	"testing"
	"time"
)

// holdLog finds a writer's hold that overlaps any other hold of its name,
// and nothing else: readers may overlap each other, and a hold that starts
// as the one before it ends does not overlap it.
func TestHoldLogOverlaps(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, tc := range []struct {
		name  string
		spans []heldSpan
		want  int
	}{
		{"one after another", []heldSpan{{from: at(0), to: at(5)}, {from: at(5), to: at(9)}, {from: at(10), to: at(12)}}, 0},
		{"readers together", []heldSpan{{from: at(0), to: at(5), shared: true}, {from: at(1), to: at(9), shared: true}}, 0},
		{"writers overlap by 1ms", []heldSpan{{from: at(0), to: at(5), token: 1}, {from: at(4), to: at(9), token: 2}}, 1},
		{"writer inside a reader", []heldSpan{{from: at(0), to: at(10), shared: true}, {from: at(3), to: at(4)}}, 1},
		{"reader inside a writer", []heldSpan{{from: at(0), to: at(10)}, {from: at(3), to: at(4), shared: true}}, 1},
		{"out of order", []heldSpan{{from: at(4), to: at(9)}, {from: at(0), to: at(5)}, {from: at(20), to: at(21)}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l holdLog
			for _, s := range tc.spans {
				l.mu.Lock()
				if l.spans == nil {
					l.spans = map[string][]heldSpan{}
				}
				l.spans["n"] = append(l.spans["n"], s)
				l.mu.Unlock()
			}
			if got := l.overlaps(); len(got) != tc.want {
				t.Errorf("overlaps = %q, want %d", got, tc.want)
			}
		})
	}
}
