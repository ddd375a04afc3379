package padlock

import (
	"context"
	"sync"
	"time"

	"github.com/padlock-go/padlock/backends"
)

// handoffs times hand-offs between a Locker's own holds: from the moment
// Unlock sent the release of an exclusive hold (a mutex, a writer) to the
// moment a Lock call of the same Locker, waiting on the name since before
// that release, got the next hold of it. Both ends are on this process's
// clock, so no clock skew enters; the driver proves the waiter's hold
// directly followed the released one (backends.Successor), so a holder
// elsewhere that came between is never timed as part of a hand-off.
// Hand-offs between Lockers are not seen here; every Locker times the
// ones between its own holds, which cross the same server and network.
//
// Names are tracked only while a Lock call of this Locker waits on them,
// so the map holds no more entries than there are waiting calls.
type handoffs struct {
	mu    sync.Mutex
	names map[string]handoffName
}

// handoffName is one name with waiting Lock calls.
type handoffName struct {
	waiting int       // exclusive Lock calls of this Locker waiting on it
	token   uint64    // the last hold of it this Locker released while they waited
	at      time.Time // when that release was sent; zero if none
	// sure is true once the server confirmed that release. Until then a
	// waiter's grant that followed it is kept in got: a hold that was
	// gone already (force-released, run out) was never released by it,
	// and the waiter followed it earlier than at.
	sure bool
	got  time.Time
}

// wait registers a Lock call about to wait on name and returns when it
// started.
func (hs *handoffs) wait(name string) time.Time {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.names == nil {
		hs.names = map[string]handoffName{}
	}
	n := hs.names[name]
	n.waiting++
	hs.names[name] = n
	return time.Now()
}

// granted ends the wait that began at since: dh is the hold it kept, got
// when it came (nil if the call failed or gave its first grant back). It
// returns how long after the release it followed the grant came, if dh
// directly followed a hold of this Locker whose release, sent during the
// wait, the server has confirmed; if the release is not confirmed yet,
// released returns it.
func (hs *handoffs) granted(name string, since, got time.Time, dh backends.Hold) (time.Duration, bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	n, ok := hs.names[name]
	if !ok {
		return 0, false
	}
	n.waiting--
	defer func() { hs.store(name, n) }()
	s, ok := dh.(backends.Successor)
	if !ok || n.at.IsZero() || n.at.Before(since) || !n.at.Before(got) {
		return 0, false
	}
	if prev, ok := s.Follows(); !ok || prev != n.token {
		return 0, false
	}
	if !n.sure {
		n.got = got
		return 0, false
	}
	return got.Sub(n.at), true
}

// releasing notes that the exclusive hold token of name is about to be
// released, if a Lock call of this Locker waits on the name, and no grant
// still awaits the confirmation of the release before (its holder may
// release it again before that release's answer is back: that hand-off
// goes untimed, the one before is kept).
func (hs *handoffs) releasing(name string, token uint64) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if n, ok := hs.names[name]; ok && n.waiting > 0 && n.got.IsZero() {
		hs.names[name] = handoffName{waiting: n.waiting, token: token, at: time.Now()}
	}
}

// released settles the release of token noted by releasing: ok if the
// server confirmed it. It returns the hand-off to a waiter whose grant
// came before the confirmation.
func (hs *handoffs) released(name string, token uint64, ok bool) (time.Duration, bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	n, found := hs.names[name]
	if !found || n.token != token || n.at.IsZero() {
		return 0, false
	}
	defer func() { hs.store(name, n) }()
	if !ok {
		n.at, n.got = time.Time{}, time.Time{}
		return 0, false
	}
	n.sure = true
	if n.got.IsZero() {
		return 0, false
	}
	d := n.got.Sub(n.at)
	n.got = time.Time{}
	return d, true
}

// store keeps n as name's entry while a call waits on the name or a
// grant awaits its release's confirmation, and drops it otherwise. hs.mu
// is held.
func (hs *handoffs) store(name string, n handoffName) {
	if n.waiting > 0 || !n.got.IsZero() {
		hs.names[name] = n
		return
	}
	delete(hs.names, name)
}

// timesHandoff says whether a hold of this mode and limit is an end of a
// timed hand-off: an exclusive hold that one holder has at a time.
func timesHandoff(mode backends.Mode, limit int) bool {
	return mode == backends.Exclusive && limit <= 1
}

// recordHandoff records a timed hand-off.
func (t *telemetry) recordHandoff(d time.Duration) {
	t.handoff.Record(context.Background(), d.Seconds(), t.onBackend.record...)
}
