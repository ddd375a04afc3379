package backends

import "time"

// The timing policy below is shared by the portable layer and the drivers:
// the portable layer gives a hold up at its Grant's Deadline, and a driver
// that keeps state of its own under a lease (a session, a quorum's
// validity) must stop relying on it at the same moment, not a moment later.

// MinTTL is the shortest TTL the portable layer accepts (padlock.WithTTL
// refuses less). Below it the safety margin and the renewal period leave
// too little time for a round trip. A driver may raise a TTL to its
// server's own minimum (Capabilities.MinTTL), never lower it; one that
// opens a probe session to learn the server's minimum asks for MinTTL.
const MinTTL = 200 * time.Millisecond

// SafetyMargin returns how long before the server may expire a lease of
// the given TTL the hold is given up: TTL/20 plus 50ms. It covers a
// relative clock-rate drift between client and server of up to 5% and the
// delay between the deadline and the moment Done is observed.
//
// The lost-lock rule: Done closes no later than
//
//	(send time of the last renewal the server acknowledged) + TTL − SafetyMargin(TTL)
//
// where TTL is the lease the server actually granted (Grant.Deadline). The
// server cannot expire the lease before send time + TTL, so Done closes
// before anyone else can acquire the lock, as long as clock drift stays
// within the margin. A driver must not return a Grant whose Deadline has
// passed: a hold that arrives with less than the margin left is no hold.
func SafetyMargin(ttl time.Duration) time.Duration {
	return ttl/20 + 50*time.Millisecond
}

// Deadline is when a hold under g is given up: Expiry less
// SafetyMargin(TTL). The portable layer closes the hold's Done then unless
// a renewal moved it; a driver that shares one lease among many holds (an
// etcd session) stops using the lease then.
func (g Grant) Deadline() time.Time { return g.Expiry().Add(-SafetyMargin(g.TTL)) }
