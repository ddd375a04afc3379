package mysqlpg

import "testing"

// A head waits for a release newer than the holder it saw (its token), or,
// having seen no holder's row (token 0), for any release: never for none.
// releasedSince(0) used to report a release at every call, and a head on
// a name whose row did not exist yet tried again at once, round after
// round, for as long as the name stayed held.
func TestReleasedSince(t *testing.T) {
	l := &listener{waiters: map[string]map[*waiter]struct{}{}}
	w := &waiter{l: l, key: "k", c: make(chan struct{}, 1)}
	l.waiters["k"] = map[*waiter]struct{}{w: {}}
	if w.releasedSince(0) {
		t.Fatal("no release yet, and releasedSince(0) says one came")
	}
	l.wake("k:5")
	if w.releasedSince(6) {
		t.Error("the release of token 5 counted as one of token 6 or later")
	}
	if !w.releasedSince(5) {
		t.Error("the release of token 5 not seen")
	}
	if w.releasedSince(0) {
		t.Error("a release seen once counted again")
	}
	l.wake("k:3")
	if !w.releasedSince(0) {
		t.Error("a release, any, not seen by a waiter that waits for any")
	}
	l.wake("") // every waiter, naming no token: every token's
	if !w.releasedSince(1 << 62) {
		t.Error("a release naming no token not seen as the latest's")
	}
}
