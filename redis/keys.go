package redis

import (
	"strings"

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
	holds     string // readers and permits: hold ids by lease expiry (server ms)
	tokens    string // the same ids by their fencing token
	values    string // elections: candidacy ids to their values (elect.lua)
	waiters   string // non-fair mode: waiter ids by arrival, woken one at a time
	reserved  string // non-fair mode: the waiter the name is kept for a moment
}

func keysFor(prefix, name string) keys {
	// Escaping '{' and '}' keeps any valid name inside one hash tag.
	base := prefix + ":{" + driverkit.EscapeName(name, "{}") + "}:"
	// Every key is a slice of one string, built in one allocation: an
	// acquisition makes them all, and the uncontended cycle counts its
	// allocations.
	var b strings.Builder
	b.Grow(11*len(base) + len(keySuffixes))
	key := func(suffix string) string {
		start := b.Len()
		b.WriteString(base)
		b.WriteString(suffix)
		return b.String()[start:]
	}
	return keys{lock: key("lock"), fence: key("fence"), queue: key("queue"),
		deadlines: key("deadlines"), channel: key("wake"), forced: key("forced"),
		holds: key("holds"), tokens: key("tokens"), values: key("values"), waiters: key("waiters"), reserved: key("reserved")}
}

// keySuffixes are the suffixes keysFor appends, all together: the room
// they take.
const keySuffixes = "lock" + "fence" + "queue" + "deadlines" + "wake" + "forced" + "holds" + "tokens" + "values" + "waiters" + "reserved"

// Key lists of the scripts, in the order of their headers.
func (k keys) acquire() []string {
	return []string{k.lock, k.fence, k.queue, k.deadlines, k.holds, k.tokens, k.waiters, k.reserved}
}

func (k keys) renew() []string { return []string{k.lock, k.holds, k.tokens} }

func (k keys) release() []string {
	return []string{k.lock, k.queue, k.deadlines, k.fence, k.holds, k.tokens, k.waiters, k.reserved}
}

func (k keys) forcedRelease() []string { return append(k.release(), k.forced) }

func (k keys) cancel() []string {
	return []string{k.lock, k.queue, k.deadlines, k.fence, k.holds, k.tokens, k.waiters, k.reserved}
}

func (k keys) inspect() []string {
	return []string{k.lock, k.fence, k.queue, k.holds, k.tokens, k.values}
}

// electing is a candidacy's key list for a mutex script (elect.lua): the
// script's own, then the values hash.
func (k keys) electing(script []string) []string { return append(script, k.values) }

func (k keys) proclaim() []string { return []string{k.lock, k.values} }

func (k keys) leader() []string { return []string{k.lock, k.fence, k.values} }
