package backends

import (
	"context"
	"time"
)

// ForcedRetention is how long, at least, a driver that implements
// ForcedLister keeps the record of a forced release on the server: long
// enough for any console that looks at the holders a few times a minute to
// see it.
const ForcedRetention = 10 * time.Minute

// ForcedRelease is the record a forced release leaves on the server: which
// hold was taken away from its holder, and when.
type ForcedRelease struct {
	// Name is the lock's name.
	Name string
	// Token and ID are the forced hold's, as Holders reported them: the
	// pair tells a forced release from a release by the holder, even on
	// a backend whose tokens may repeat (RedLock) or whose IDs are
	// reused (etcd's slot keys).
	Token uint64
	ID    string
	// At is when it was forced, on the server's clock where the backend
	// has one to offer, else on the forcing client's.
	At time.Time
}

// ForcedLister is implemented by ForceReleasers that record every forced
// release on the server, so that another process (the padlock console) can
// tell a lock taken away by an operator from one released by its holder.
// ForceRelease must write the record no later than it removes the claim
// (in one transaction where the server has them; before it otherwise,
// withdrawing it if the release then finds the lock changed hands), so
// that whoever sees the claim gone can see the record.
type ForcedLister interface {
	// ForcedReleases returns the forced releases recorded under prefix
	// ("" for all) in the last ForcedRetention at least, sorted by name
	// and then time. A backend may keep only the latest per name.
	ForcedReleases(ctx context.Context, prefix string) ([]ForcedRelease, error)
}
