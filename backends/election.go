package backends

import "context"

// An election is a lock whose holders are candidates: the holder is the
// leader, and it carries a value (its address, say) that others read. A
// candidacy is an Exclusive request of limit 1 with Request.Elect set and
// Request.Value its first value; everything else (the lease, its renewal,
// loss notice, Done before regrant, the token of each term, FIFO among
// candidates where the driver queues) is the lock's. A driver that
// reports Capabilities.Elections implements Elector, its holds implement
// Proclaimer, and it stores the value with the claim (Holder.Value).

// Leader is the leader of an election as the server records it now.
type Leader struct {
	// Value is what the leader proclaimed last (its Campaign's value, or
	// its latest Proclaim).
	Value string
	// Token is the fencing token of the leader's term.
	Token uint64
}

// Elector is implemented by drivers that run elections.
type Elector interface {
	// Leader returns the leader of the election called name: the live
	// hold of the name and its value, read from the server as a
	// linearizable read where the server offers one. ok is false when
	// the name has no live hold (no leader), and then the error is nil.
	// A claim that is not a candidacy (a plain Lock on the name) is no
	// leader: ok false.
	Leader(ctx context.Context, name string) (ld Leader, ok bool, err error)
}

// Proclaimer is implemented by the holds of drivers that run elections.
type Proclaimer interface {
	// Proclaim replaces the hold's value on the server, if and only if the
	// hold is still the name's holder: a deposed leader's Proclaim changes
	// nothing and returns ErrNotHeld. ErrUnavailable: the outcome is
	// unknown. It is never called while the hold's renewal or release
	// runs.
	Proclaim(ctx context.Context, value string) error
}

// Watcher is implemented by drivers whose server can push a change of a
// name's holds (an etcd watch, a ZooKeeper watch, Redis pub/sub,
// PostgreSQL NOTIFY). padlock's Observe then reads the leader again on
// each signal, and polls only to see a lease run out; without it, Observe
// polls.
type Watcher interface {
	// Watch sends on the returned channel (buffered, 1: a signal pending
	// is not repeated) whenever a hold of name is granted, released,
	// changes its value, or is seen to expire, until ctx ends; it then
	// closes the channel. A signal may be spurious; a change must never
	// go unsignalled while the watch is up. An error means no watch.
	Watch(ctx context.Context, name string) (<-chan struct{}, error)
}
