// Package padlock is a distributed lock framework with one API over several
// backends, picked by URL: etcd (the reference CP backend), ZooKeeper,
// Redis (single instance, fair queue, Cluster, Sentinel and RedLock),
// PostgreSQL and MySQL/MariaDB (a lease table or advisory locks), and an
// in-process backend for tests.
//
//	locker, err := padlock.Open(ctx, "etcd://127.0.0.1:2379/padlock?ttl=10s")
//	lk, err := locker.Lock(ctx, "orders/42")
//	defer lk.Unlock(ctx)
//	// ... work, passing lk.Token() to the storage you write to ...
//
// Holding a distributed lock is never a certainty: a pause, a partition or a
// server failover can end a hold at any moment. Watch lk.Done(), which closes
// before the server could grant the lock to anyone else under the
// assumptions of docs/lost-lock.md (the server keeps its state, its clock
// moves at most the safety margin, no operator frees the lease; that page
// lists the measured exceptions), and pass the fencing token lk.Token() to
// the resource you protect so that it can reject writes from a holder that
// lost the lock without knowing. See docs/ for each backend's guarantees.
package padlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// Locker acquires locks from one backend. It is safe for concurrent use. A
// Locker is one client: reentrancy is scoped to it, and its Close releases
// everything it holds.
type Locker struct {
	drv      backends.Driver
	caps     Capabilities
	defaults settings
	log      *slog.Logger
	tel      *telemetry

	ctx    context.Context // cancelled by Close, aborting waits and renewals
	cancel context.CancelFunc

	renew   *renewer           // the one renewal loop of every hold
	hand    handoffs           // hand-offs between this Locker's holds, timed
	janitor *driverkit.Janitor // releases that failed, retried in the background

	mu      sync.Mutex
	closed  bool
	owned   map[ownedKey]*hold         // live reentrant holds by owner and name
	pending map[ownedKey]chan struct{} // reentrant acquisitions in flight; closed when done
	holds   map[*hold]struct{}         // every live hold, for Close
	calls   sync.WaitGroup             // Lock and TryLock calls in flight
	bg      sync.WaitGroup             // the renewal loop and its renewals
}

type ownedKey struct{ owner, name string }

func newLocker(drv backends.Driver, s openSettings) *Locker {
	ctx, cancel := context.WithCancel(context.Background())
	caps := drv.Capabilities()
	// The driver reports its server's minimum lease; the shortest TTL a
	// hold can get here is never below the shortest WithTTL accepts.
	caps.MinTTL = max(caps.MinTTL, MinTTL)
	l := &Locker{
		drv: drv, caps: caps, defaults: s.defaults, log: s.logger,
		tel: newTelemetry(s.meters, s.tracers, cmp.Or(s.backend, backendName(drv))),
		ctx: ctx, cancel: cancel, janitor: driverkit.NewJanitor(),
		owned: map[ownedKey]*hold{}, pending: map[ownedKey]chan struct{}{}, holds: map[*hold]struct{}{},
	}
	l.renew = newRenewer(l)
	l.bg.Go(l.renew.loop)
	return l
}

// Capabilities reports the guarantees of this Locker's backend
// configuration. Its MinTTL is the shortest TTL a hold gets here: never
// below MinTTL, and raised to the server's own minimum where it has one.
func (l *Locker) Capabilities() Capabilities { return l.caps }

// DefaultCloseTimeout bounds Close: releases that cannot reach the server
// by then are abandoned to their server-side lease.
const DefaultCloseTimeout = 10 * time.Second

// Close releases every hold of this Locker (their Err becomes ErrClosed),
// aborts waiting calls with ErrClosed, and closes the backend client, all
// within DefaultCloseTimeout. Calls on a closed Locker return ErrClosed; a
// second Close returns nil.
func (l *Locker) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultCloseTimeout)
	defer cancel()
	return l.CloseContext(ctx)
}

// CloseContext is Close with a context bounding the releases.
func (l *Locker) CloseContext(ctx context.Context) error {
	if ctx == nil {
		panic("padlock: CloseContext called with a nil Context")
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	holds := make([]*hold, 0, len(l.holds))
	for h := range l.holds {
		holds = append(holds, h)
	}
	l.mu.Unlock()

	// Every handle's Done closes now, before any release goes out.
	var ended []*hold
	for _, h := range holds {
		if h.end(ErrClosed) {
			ended = append(ended, h)
		}
	}
	l.cancel() // aborts waiting calls, the renewal loop and renewals in flight
	// A driver's Acquire that ignores its context may still be running
	// when ctx ends; closing the driver below is what can still end it.
	_ = driverkit.Wait(ctx, &l.calls)
	var (
		errs  []error
		errMu sync.Mutex
		wg    sync.WaitGroup
		sem   = make(chan struct{}, 16) // release in parallel, politely
	)
	for _, h := range ended {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := h.release(ctx); err != nil && !errors.Is(err, ErrNotHeld) {
				errMu.Lock()
				errs = append(errs, err)
				errMu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := l.janitor.Close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("close: background releases still running: %w", err))
	}
	if err := driverkit.Wait(ctx, &l.bg); err != nil {
		// A driver call that ignores its context is still running; closing
		// the driver below is what can still end it.
		errs = append(errs, fmt.Errorf("close: renewals still running: %w", err))
	}
	if err := l.drv.Close(ctx); err != nil {
		errs = append(errs, err)
	}
	return tidy(errors.Join(errs...))
}

// forget drops a finished hold from the Locker's indexes.
func (l *Locker) forget(h *hold) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.holds, h)
	if h.owner != "" {
		if k := (ownedKey{h.owner, h.name}); l.owned[k] == h {
			delete(l.owned, k)
		}
	}
}
