package etcd

import (
	"context"
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
// release), each a change of the leader or a spurious signal. It also
// signals each time the server creates its watch, the first time
// included: a change between Watch's return and the creation is then read
// on that signal, and one after it arrives as an event. So Watch returns
// at once, and an outage at its start only delays the push. The watch
// requires a leader, so a member cut off from its cluster ends it rather
// than going quiet; whenever the watch ends before ctx (an outage, a
// compaction, a lost leader, a stale auth token) it is made again, after
// a backoff. Each attempt's watch has its own context, cancelled when the
// attempt ends, so clientv3 drops it from the shared watch stream.
func (d *driver) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	return d.watchRange(ctx, d.queuePrefix(name))
}

// WatchHolders signals every event under the range of the names that
// begin with prefix (names are escaped character by character, so the
// escaped prefix begins exactly their keys, as Holders reads them): a
// grant, a release, a waiter joining or leaving, a lease's expiry, a
// force release and its record. It is made again after an outage as Watch
// is, and signals then.
func (d *driver) WatchHolders(ctx context.Context, prefix string) (<-chan struct{}, error) {
	return d.watchRange(ctx, d.prefix+"/"+driverkit.EscapeName(prefix, "/"))
}

// watchRange runs a nameWatch on the keys that begin with pfx until ctx
// ends or the driver closes.
func (d *driver) watchRange(ctx context.Context, pfx string) (<-chan struct{}, error) {
	wctx, cancel := context.WithCancel(ctx)
	stopOnClose := context.AfterFunc(d.ctx, cancel)
	out := make(chan struct{}, 1)
	w := &nameWatch{d: d, pfx: pfx, out: out}
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
	d   *driver
	pfx string
	out chan struct{} // buffered, 1
}

// run watches until ctx ends, starting over after a backoff whenever a
// watch ends.
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
		created := w.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		if created {
			attempt = 0 // it worked for a while: start over at once
		}
	}
}

// follow runs one watch until it ends; it reports whether the server
// created it.
func (w *nameWatch) follow(ctx context.Context) (created bool) {
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
			return created
		}
		// Created (what it may have missed before), or events.
		created = created || resp.Created
		select {
		case w.out <- struct{}{}:
		default: // a signal is pending already
		}
	}
	return created
}
