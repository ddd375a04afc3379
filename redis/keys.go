package redis

import (
	"github.com/padlock-go/padlock/driverkit"
)

// DefaultPrefix starts every key padlock writes, unless ?prefix= says
// otherwise.
const DefaultPrefix = "padlock"

// keys are the Redis keys of one lock name. They share a hash tag, so in a
// Redis Cluster they live in one slot and one script can touch them all.
type keys struct {
	lock      string // the hold id, with the lease as its expiry
	fence     string // fencing counter, persistent on purpose
	queue     string // fair mode: waiter ids by arrival
	deadlines string // fair mode: waiter ids by place deadline
	channel   string // wake-up channel for waiters
	forced    string // records of forced releases, by time (ForcedReleases)
}

func keysFor(prefix, name string) keys {
	// Escaping '{' and '}' keeps any valid name inside one hash tag.
	base := prefix + ":{" + driverkit.EscapeName(name, "{}") + "}:"
	return keys{lock: base + "lock", fence: base + "fence", queue: base + "queue",
		deadlines: base + "deadlines", channel: base + "wake", forced: base + "forced"}
}
