package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// warmWaitHold is how long the contended warm-up's holder keeps its name
// before it releases it: long enough for the other clients' Locks to find
// it taken and start waiting. One that comes later only takes it free,
// which warms it less and breaks nothing.
const warmWaitHold = 50 * time.Millisecond

// warmUpWaiting has every client wait for name, the phase's first name
// (S1's is a name of its own), while another client holds it, before the phase measures anything: what
// a client sets up for its first wait (a pub/sub subscription, a watch, a
// LISTEN connection, a queue connection) and for its first use of the
// name (PostgreSQL's and MySQL's advisory mode hold each name on one of a
// few sessions, dialled at first use) is then paid outside the phase, as
// openClient's warm-up pays for dialling. Without it each turn's first
// contended acquisitions carried that set-up, for some implementations
// and not for others. Client 0 holds while the others wait; then the last
// holds while client 0 waits; twice, because a client whose first Lock
// dials takes the name free once the holder has let it go, without
// waiting. Implementations that do not wait (floors) skip it, and so do
// the workloads on distinct names (U1, U2), where nobody waits.
func warmUpWaiting(ctx context.Context, im Impl, load Load, clients []Client, name string) error {
	if !im.Waits || len(clients) < 2 || load.Workload == U1 || load.Workload == U2 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, minGrace)
	defer cancel()
	last := len(clients) - 1
	for range 2 {
		if err := warmRound(ctx, clients[0], clients[1:], name); err != nil {
			return err
		}
		if err := warmRound(ctx, clients[last], clients[:1], name); err != nil {
			return err
		}
	}
	return nil
}

// warmRound has holder take name, and each of waiters Lock it while it
// is held; each releases at once once granted.
func warmRound(ctx context.Context, holder Client, waiters []Client, name string) error {
	h, err := warmLock(ctx, holder, name)
	if err != nil {
		return err
	}
	errs := make([]error, len(waiters))
	var wg sync.WaitGroup
	for i, c := range waiters {
		wg.Go(func() {
			w, err := warmLock(ctx, c, name)
			if err == nil {
				err = w.Release(ctx)
			}
			errs[i] = err
		})
	}
	t := time.NewTimer(warmWaitHold)
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	err = h.Release(ctx)
	// A client library that ignores contexts (zk.Lock) would wait on
	// past the bound: closing the clients lets go of it, as runPhase's
	// watchdog does.
	waited := make(chan struct{})
	go func() { wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
		for _, c := range waiters {
			c.Close()
		}
		<-waited
	}
	if err = errors.Join(append(errs, err)...); err != nil {
		return fmt.Errorf("warm up waiting: %w", err)
	}
	return nil
}

// warmLock is c.Lock, asked again while a client gives up by its own rule
// (redsync's tries), as the phase asks again.
func warmLock(ctx context.Context, c Client, name string) (Held, error) {
	for {
		h, err := c.Lock(ctx, name)
		if err == nil || !gaveUpErr(err) || ctx.Err() != nil {
			return h, err
		}
	}
}
