package mysqlpg

import "testing"

// TestSlotLine: slots go to waiters in the order they asked; a withdrawn
// request leaves the line, and one withdrawn after it was handed a slot
// hands the slot on.
func TestSlotLine(t *testing.T) {
	s := newSlotLine(2)
	a, b := s.take(), s.take()
	if !closed(a) || !closed(b) {
		t.Fatal("two free slots not handed at once")
	}
	c, d, e := s.take(), s.take(), s.take()
	if closed(c) || closed(d) || closed(e) {
		t.Fatal("a slot handed while none was free")
	}
	s.cancel(d) // leaves the line
	s.give()    // a's slot: to c, the first in line
	if !closed(c) || closed(e) {
		t.Fatalf("c handed %v, e handed %v: want c only", closed(c), closed(e))
	}
	s.cancel(c) // handed, then withdrawn: the slot goes on to e
	if !closed(e) {
		t.Fatal("a withdrawn slot was not handed on")
	}
	if closed(d) {
		t.Fatal("a withdrawn request was handed a slot")
	}
	s.give() // b's
	s.give() // e's
	if s.free != 2 || len(s.line) != 0 {
		t.Fatalf("free %d, line %d after every slot came back: want 2 and 0", s.free, len(s.line))
	}
}
