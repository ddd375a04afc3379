package faults

import (
	"context"
	"slices"
	"sync"
)

// history is a run's events, from every process, in arrival order (each
// process's own in order; sort by T for one timeline).
type history struct {
	mu      sync.Mutex
	events  []Event
	changed chan struct{} // closed, and replaced, on every add
}

func newHistory() *history { return &history{changed: make(chan struct{})} }

func (h *history) add(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
	close(h.changed)
	h.changed = make(chan struct{})
}

// snapshot returns the events so far, sorted by time.
func (h *history) snapshot() []Event {
	h.mu.Lock()
	out := slices.Clone(h.events)
	h.mu.Unlock()
	slices.SortStableFunc(out, func(a, b Event) int {
		switch {
		case a.T < b.T:
			return -1
		case a.T > b.T:
			return 1
		}
		return 0
	})
	return out
}

// find returns the first event, in arrival order from index from, that
// matches pred, and the index after it; ok is false if none does yet.
func (h *history) find(from int, pred func(Event) bool) (Event, int, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := from; i < len(h.events); i++ {
		if pred(h.events[i]) {
			return h.events[i], i + 1, true
		}
	}
	return Event{}, len(h.events), false
}

// await waits until an event after index from matches pred, or ctx ends.
func (h *history) await(ctx context.Context, from int, pred func(Event) bool) (Event, int, error) {
	for {
		h.mu.Lock()
		ch := h.changed
		h.mu.Unlock()
		e, next, ok := h.find(from, pred)
		if ok {
			return e, next, nil
		}
		from = next
		select {
		case <-ch:
		case <-ctx.Done():
			return Event{}, from, ctx.Err()
		}
	}
}

// mark is the index after the last event: what await's from starts at to
// wait for what comes next.
func (h *history) mark() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.events)
}
