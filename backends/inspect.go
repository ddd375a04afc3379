package backends

import (
	"context"
	"time"
)

// Holder is one hold on a lock as the server records it, for operators: who
// holds it, since when, until when, and how many wait.
type Holder struct {
	// Name is the lock's name.
	Name string
	// Token is the holder's fencing token.
	Token uint64
	// ID identifies the acquisition on the server (a key, a hold id, a row
	// owner): what a force release removes.
	ID string
	// Host and PID are the holding process's, as it recorded them.
	Host string
	PID  int
	// Owner is the reentrancy owner (padlock.WithOwner), if any.
	Owner string
	// Since is when the holder's claim was recorded: on a queueing backend
	// (etcd, ZooKeeper) that is when it joined the queue, not when its turn
	// came, since a hand-off writes nothing.
	Since time.Time
	// Expires is the earliest time the server may let the claim lapse
	// unless it is renewed: the time the server reported left, counted
	// from when it was asked, so a claim gone before Expires was released
	// or forced, not expired. Zero if the backend cannot tell.
	Expires time.Time
	// Mode and Limit are the hold's (a reader is Shared; a permit of a
	// semaphore of n is Exclusive with Limit n). A name may have several
	// holders: readers, or permits.
	Mode  Mode
	Limit int
	// Elect says the hold is a candidacy in an election (Request.Elect):
	// the holder is the leader, and Value is what it proclaimed last.
	Elect bool
	Value string
	// Waiters is how many acquisitions wait in line behind the holder, on
	// backends that queue them; -1 when the backend cannot count them.
	Waiters int
}

// Inspector is implemented by drivers that can list the locks held under
// a name prefix.
type Inspector interface {
	// Holders returns every hold on a lock whose name starts with prefix
	// ("" for all), sorted by name and then token: one entry per hold, so
	// a name held by readers or permits has several.
	Holders(ctx context.Context, prefix string) ([]Holder, error)
}

// HoldersWatcher is implemented by drivers whose server can push a change
// of any hold under a name prefix (an etcd watch on the prefix's range,
// Redis's keyspace notifications, ZooKeeper's children watches),
// so that an inspector reads the holders again when they change instead
// of only at its polling interval.
type HoldersWatcher interface {
	// WatchHolders sends on the returned channel (buffered, 1: a signal
	// pending is not repeated) whenever a hold of a name under prefix is
	// granted, released, or expires, or an acquisition joins or leaves a
	// name's line, until ctx ends or the driver closes; it then closes
	// the channel. Its first signal says that the watch is up: every
	// change after it is signalled. It also signals when its watch is made
	// again after an outage, since changes may have gone unseen meanwhile. A signal may be spurious; a change
	// must never go unsignalled while the watch is up. An error means no
	// watch.
	WatchHolders(ctx context.Context, prefix string) (<-chan struct{}, error)
}

// ForceReleaser is implemented by drivers that let an operator take a lock
// away from its holder.
type ForceReleaser interface {
	// ForceRelease removes the current holders' claims on name from the
	// server (a writer; or every reader or permit of the name) and returns
	// what it removed (the oldest, if several), or ErrNotHeld if nobody
	// holds it. The holder learns at its next renewal (ErrNotHeld: its Done
	// closes); until then it may still believe it holds the lock, which
	// is why resources must check fencing tokens. A driver that is a
	// ForcedLister records the release on the server as well.
	ForceRelease(ctx context.Context, name string) (Holder, error)
}

// Identity is what a driver records with an acquisition for Holders: the
// process's host and pid, and the request's owner. An Inspector stores it
// with each claim (driverkit.IdentityOf builds it for a Request) and
// reports it back in Holder; the JSON tags are its stored form where a
// driver stores it as JSON (etcd, Redis, ZooKeeper).
type Identity struct {
	Host  string `json:"host,omitempty"`
	PID   int    `json:"pid,omitempty"`
	Owner string `json:"owner,omitempty"`
	// At is when the claim was recorded, on the client's clock, in Unix
	// milliseconds.
	At int64 `json:"at,omitempty"`
}
