package etcd

import (
	"context"
	"errors"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// Watch signals every event under name's queue prefix: a key put (a
// candidate or a waiter joins, a grant on an empty name, a Proclaim) or
// deleted (a release, a cancelled wait, a lease's expiry, a force
// release), each a change of the leader or a spurious signal. Watch
// returns once the server has created the watch, so a change after it
// returns is signalled. The watch requires a leader, so a member cut off
// from its cluster ends it rather than going quiet; whenever the watch
// ends before ctx (an outage, a compaction, a lost leader, a stale auth
// token) it is made again, after a backoff, and signals once it is back,
// for what it may have missed. Each attempt's watch has its own context,
// cancelled when the attempt ends, so clientv3 drops it from the shared
// watch stream.
func (d *driver) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	wctx, cancel := context.WithCancel(ctx)
	stopOnClose := context.AfterFunc(d.ctx, cancel)
	out := make(chan struct{}, 1)
	ready := make(chan error, 1)
	w := &nameWatch{d: d, pfx: d.queuePrefix(name), out: out, ready: ready}
	if err := d.goBackground(func() {
		defer close(out)
		defer stopOnClose()
		defer cancel()
		w.run(wctx)
	}); err != nil {
		stopOnClose()
		cancel()
		return nil, err
	}
	t := time.NewTimer(d.reqTimeout)
	defer t.Stop()
	var err error
	select {
	case err = <-ready:
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
		err = driverkit.Unavailable("etcd watch", errors.New("the watch was not created within the request timeout"))
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return out, nil
}

// goBackground runs f on the driver's background group, unless the driver
// has closed (its queues are gone): Close waits for the group, and must
// not see it grow while it waits.
func (d *driver) goBackground(f func()) error {
	d.qmu.Lock()
	defer d.qmu.Unlock()
	if d.queues == nil {
		return backends.ErrClosed
	}
	d.bg.Go(f)
	return nil
}

// nameWatch is one Watch's loop.
type nameWatch struct {
	d     *driver
	pfx   string
	out   chan struct{} // buffered, 1
	ready chan error    // buffered, 1: the first attempt's creation, or its failure; then nil
}

// run watches until ctx ends, starting over after a backoff whenever a
// watch ends; a first attempt that fails ends it (Watch then fails).
func (w *nameWatch) run(ctx context.Context) {
	backoff := backends.ExponentialBackoff(20*time.Millisecond, time.Second)
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(backoff.NextBackoff(attempt))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		created, err := w.follow(ctx)
		if w.ready != nil { // never created: Watch fails
			w.ready <- cmpErr(err, errors.New("etcd watch ended before it was created"))
			return
		}
		if ctx.Err() != nil {
			return
		}
		if created {
			attempt = 0 // it worked for a while: start over at once
		}
	}
}

// follow runs one watch until it ends; it reports whether the server
// created it, and why it ended.
func (w *nameWatch) follow(ctx context.Context) (created bool, err error) {
	d := w.d
	gen := d.watchStream.Load()
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	// The driver's watches share one gRPC stream (see queue.follow).
	wctx = metadata.AppendToOutgoingContext(wctx, "padlock-watch-stream", strconv.FormatInt(gen, 10))
	for resp := range d.cli.Watch(wctx, w.pfx, clientv3.WithPrefix(), clientv3.WithCreatedNotify()) {
		if err := resp.Err(); resp.Canceled || err != nil {
			if staleToken(err) {
				d.freshWatchStream(ctx, gen)
			}
			return created, cmpErr(err, errors.New("etcd watch cancelled"))
		}
		if resp.Created {
			created = true
			if w.ready != nil {
				w.ready <- nil
				w.ready = nil
				continue
			}
		}
		// Made again after a break (what it missed), or events.
		select {
		case w.out <- struct{}{}:
		default: // a signal is pending already
		}
	}
	return created, cmpErr(ctx.Err(), errors.New("etcd watch closed"))
}

// cmpErr returns err, or otherwise when err is nil.
func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}
