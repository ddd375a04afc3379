package mysqlpg

import (
	"slices"
	"sync"
)

// slotLine hands a Locker's queue slots (maxQueued connections of the
// waits pool, queue.go and queue_pg.go) to its waiting writers in the
// order they asked. Before, a slot went to whichever waiter looked first
// after it freed, and a waiter outside the queue looked only after its
// own name's release woke it: under load one could stay outside for many
// releases while later waiters took every slot that freed. A waiter
// outside the queue (whose tries respect the queue, so it wins only
// while nobody queues) now has a place in line, and is woken when its
// slot is handed to it.
type slotLine struct {
	mu   sync.Mutex
	free int
	line []chan struct{} // in the order asked; closed when handed a slot
}

func newSlotLine(n int) *slotLine { return &slotLine{free: n} }

// take asks for a slot. The channel is closed once the slot is the
// caller's: at once if one is free (nobody is in line then). The caller
// gives it back with give, or withdraws with cancel.
func (s *slotLine) take() chan struct{} {
	c := make(chan struct{})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free > 0 {
		s.free--
		close(c)
		return c
	}
	s.line = append(s.line, c)
	return c
}

// cancel withdraws the request c: it leaves the line, or, if it was
// handed a slot meanwhile, the slot goes on to the next.
func (s *slotLine) cancel(c chan struct{}) {
	s.mu.Lock()
	if i := slices.Index(s.line, c); i >= 0 {
		s.line = slices.Delete(s.line, i, i+1)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.give()
}

// give gives a slot back: to the first in line, if any.
func (s *slotLine) give() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.line) > 0 {
		c := s.line[0]
		s.line = slices.Delete(s.line, 0, 1)
		close(c)
		return
	}
	s.free++
}

// closed reports whether c is closed (nil: never).
func closed(c <-chan struct{}) bool {
	if c == nil {
		return false
	}
	select {
	case <-c:
		return true
	default:
		return false
	}
}
