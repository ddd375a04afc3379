package padlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// Holder is one hold of a lock as the backend records it: name, fencing
// token, the holding process (host, pid, owner), since when, until when the
// server keeps it without renewal, how many wait, and its mode and limit (a
// name held by readers or permits has one Holder each). See
// Locker.Holders.
type Holder = backends.Holder

// Mode is what a hold claims on its name, as Holder reports it: Exclusive
// (a writer, a mutex, or a permit of a semaphore when Holder.Limit is
// above 1) or Shared (a reader of a read-write lock).
type Mode = backends.Mode

// Modes, re-exported from package backends.
const (
	// Exclusive: a writer, a mutex, or a permit.
	Exclusive = backends.Exclusive
	// Shared: a reader.
	Shared = backends.Shared
)

// WatchHolders signals on the returned channel whenever a hold under a
// name prefix ("" for all) may have changed: granted, released, expired,
// or a waiter joined or left. The channel is buffered (one signal pending
// at most, never repeated) and closes when ctx ends or the Locker closes.
// Read Holders on each signal: the signal says only that something
// changed. The first signal says that the watch is up (every change after
// it is signalled); signals may be spurious, and one is sent when the
// watch is made again after an outage. It returns ErrUnsupported on a
// backend that cannot push such changes (there, poll Holders). etcd and
// ZooKeeper can; so can Redis (one server, a Cluster, a Sentinel's
// primary, RedLock's masters) where its operator turned on keyspace
// notifications (notify-keyspace-events KA), and PostgreSQL in lease mode
// where the server decodes logically (wal_level=logical) and the user may
// replicate: a replication connection follows the lock table. A lease
// that expires without a release changes nothing on PostgreSQL, so it
// brings no signal there: Holder.Expires says when to look again.
func (l *Locker) WatchHolders(ctx context.Context, prefix string) (_ <-chan struct{}, err error) {
	if ctx == nil {
		panic("padlock: WatchHolders called with a nil Context")
	}
	defer func() { err = tidy(err) }()
	if prefix != "" {
		if err := validateName(prefix); err != nil {
			return nil, err
		}
	}
	w, ok := l.drv.(backends.HoldersWatcher)
	if !ok {
		return nil, fmt.Errorf("watch holders: %w", ErrUnsupported)
	}
	if err := l.enter(); err != nil {
		return nil, err
	}
	defer l.calls.Done()
	ch, err := w.WatchHolders(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("watch holders: %w", inspectError(ctx, "watch holders", err))
	}
	return ch, nil
}

// Holders lists the holds under a name prefix ("" for all), sorted by
// name and token, as the server sees them now: every client's, not only this
// Locker's. It returns ErrUnsupported on a backend that cannot list them.
func (l *Locker) Holders(ctx context.Context, prefix string) (_ []Holder, err error) {
	if ctx == nil {
		panic("padlock: Holders called with a nil Context")
	}
	defer func() { err = tidy(err) }()
	if prefix != "" {
		if err := validateName(prefix); err != nil {
			return nil, err
		}
	}
	in, ok := l.drv.(backends.Inspector)
	if !ok {
		return nil, fmt.Errorf("holders: %w", ErrUnsupported)
	}
	if err := l.enter(); err != nil {
		return nil, err
	}
	defer l.calls.Done()
	rctx, cancel := driverkit.WithRequestTimeout(ctx, 0)
	defer cancel()
	hs, err := in.Holders(rctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("holders: %w", inspectError(ctx, "list holders", err))
	}
	return hs, nil
}

// ForceUnlock takes the lock called name away from whoever holds it, for
// an operator breaking a stuck lock, and returns what it removed; it
// returns ErrNotHeld if nobody holds it and ErrUnsupported on a backend
// that cannot do it. The server keeps a record of it (ForcedReleases).
//
// The hazard: the holder is not stopped. It learns at its next renewal
// (its Done closes with ErrLost, within a third of its TTL) and until then
// may still act as the holder while the next one does too. Only a
// resource that checks fencing tokens is safe from its late writes.
func (l *Locker) ForceUnlock(ctx context.Context, name string) (_ Holder, err error) {
	if ctx == nil {
		panic("padlock: ForceUnlock called with a nil Context")
	}
	defer func() { err = tidy(err) }()
	if err := validateName(name); err != nil {
		return Holder{}, err
	}
	fr, ok := l.drv.(backends.ForceReleaser)
	if !ok {
		return Holder{}, fmt.Errorf("force unlock %q: %w", name, ErrUnsupported)
	}
	if err := l.enter(); err != nil {
		return Holder{}, err
	}
	defer l.calls.Done()
	rctx, cancel := driverkit.WithRequestTimeout(ctx, 0)
	defer cancel()
	h, err := fr.ForceRelease(rctx, name)
	if err != nil {
		return Holder{}, fmt.Errorf("force unlock %q: %w", name, inspectError(ctx, "force release", err))
	}
	return h, nil
}

// ForcedRelease is the record a forced release leaves on the server: the
// name, the token and ID of the hold taken away, and when. See
// Locker.ForcedReleases.
type ForcedRelease = backends.ForcedRelease

// ForcedRetention is how long, at least, the server keeps the record of a
// forced release.
const ForcedRetention = backends.ForcedRetention

// ForcedReleases lists the forced releases (ForceUnlock, by any client)
// recorded under a name prefix ("" for all) in the last ForcedRetention at
// least, sorted by name, so that an observer such as `padlock serve` can
// tell a lock an operator took away from one its holder released. A
// released hold is forced if a record has its name, token and ID. It
// returns ErrUnsupported on a backend that keeps no such record.
func (l *Locker) ForcedReleases(ctx context.Context, prefix string) ([]ForcedRelease, error) {
	if ctx == nil {
		panic("padlock: ForcedReleases called with a nil Context")
	}
	if prefix != "" {
		if err := validateName(prefix); err != nil {
			return nil, err
		}
	}
	fl, ok := l.drv.(backends.ForcedLister)
	if !ok {
		return nil, fmt.Errorf("forced releases: %w", ErrUnsupported)
	}
	if err := l.enter(); err != nil {
		return nil, err
	}
	defer l.calls.Done()
	rctx, cancel := driverkit.WithRequestTimeout(ctx, 0)
	defer cancel()
	fs, err := fl.ForcedReleases(rctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("forced releases: %w", inspectError(ctx, "list forced releases", err))
	}
	return fs, nil
}

// inspectError is the error of an operator's call (Holders, ForceUnlock,
// ForcedReleases): one the driver put in a class (ErrNotHeld,
// ErrUnsupported, ErrUnavailable) is left alone, and any other becomes
// ErrUnavailable (or the caller's context error). Unlike acquireError, it
// knows no wait: these calls make one bounded request.
func inspectError(ctx context.Context, what string, err error) error {
	for _, class := range []error{ErrNotHeld, ErrUnsupported, ErrUnavailable} {
		if errors.Is(err, class) {
			return err
		}
	}
	return driverkit.RequestError(ctx, what, err)
}
