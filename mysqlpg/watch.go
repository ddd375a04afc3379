package mysqlpg

import (
	"context"
	"errors"
	"fmt"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

var _ backends.Watcher = (*driver)(nil)

// errNoPush is Watch's answer on MySQL, which has no notifications:
// Observe polls.
var errNoPush = errors.New("mysqlpg: MySQL and MariaDB push no changes: Observe polls")

// Watch follows name's leader on PostgreSQL with the driver's listening
// connection (listen.go): a candidacy's grant, release and Proclaim
// NOTIFY the table's channel with the name's key, in their own statement,
// so the notification comes after the change is committed. A plain
// lock's release notifies only when someone waits; a plain lock taking
// the name from an expired candidacy, and a lease or session that ends
// without a release, notify nothing: Observe's poll sees those. While the
// listening connection is down nothing is signalled; when it is back the
// watch is signalled, since a change may have gone unseen meanwhile. Watch
// fails if the connection does not listen within the dial bound (Observe
// then polls), and on MySQL.
func (drv *driver) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	switch {
	case drv.electErr != nil:
		return nil, fmt.Errorf("%w: %w", backends.ErrUnsupported, drv.electErr)
	case drv.notify == nil:
		return nil, fmt.Errorf("%w: %w", backends.ErrUnsupported, errNoPush)
	}
	w := drv.notify.watch(ctx, lockKey(name))
	if !w.listening() {
		w.stop()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, driverkit.Unavailable("postgres watch", errors.New("the listening connection is not up"))
	}
	// The waiter's channel is buffered 1 and woken without blocking;
	// once stop has returned nothing sends on it, so it may be closed.
	go w.closeWhenDone(ctx)
	return w.c, nil
}

// closeWhenDone ends a Watch's waiter when ctx ends or the Locker closes.
func (w *waiter) closeWhenDone(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-w.l.ctx.Done():
	}
	w.stop()
	close(w.c)
}
