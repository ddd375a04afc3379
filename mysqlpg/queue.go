package mysqlpg

import (
	"context"
	"crypto/sha256"
	"database/sql"
	sqldriver "database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// MySQL's lease-mode waiters queue on the server. MySQL has no
// LISTEN/NOTIFY; waiters that polled (10 ms doubling to 500 ms) rarely saw
// the name free when its holder locked again at once, and starved for
// seconds. Now a writer that finds the name held joins the name's queue:
// it waits in GET_LOCK for the name's queue lock (queueKey), on a
// connection of its own, and the server grants that lock to one waiter at
// a time, in the order asked. The holder of the queue lock heads the
// queue: it alone tries the row (lease_acquire.sql takes a free row only
// for the head's connection while anyone is queued), polling it quickly
// since no other waiter polls, and leaves the queue once it holds the
// name, which makes the next waiter the head. A client that locks again
// right after its release finds the queue lock taken and queues behind
// the others. A waiter whose connection dies leaves the queue with it.

// maxQueued bounds the connections a Locker keeps waiting in queues (its
// waits pool, beside the pool of pool_max_conns that holds and releases
// use): a Locker uses at most pool_max_conns + maxQueued connections.
// Waiters beyond it poll until one is free (acquireQueued).
const maxQueued = 2

// headPoll paces the head's tries while the name is held: the head is the
// only waiter that polls, so it can poll often.
var headPoll = backends.ExponentialBackoff(time.Millisecond, 20*time.Millisecond)

// queueChunk bounds one GET_LOCK wait, so that a wait without a deadline
// still looks at its context now and then.
const queueChunk = 30 * time.Second

// errNoQueue is a queue connection that could not be had or failed at
// once: the waiter polls instead.
var errNoQueue = errors.New("mysqlpg: no connection to wait in the queue on")

// queueKey is the GET_LOCK name of a name's queue: named locks are per
// server, so it covers the table's identity, as advisoryKey does; 64
// characters at most.
func (drv *driver) queueKey(name string) string {
	sum := sha256.Sum256([]byte(drv.ident + "\x00queue\x00" + name))
	return "padlock-q:" + hex.EncodeToString(sum[:])[:54]
}

// queued reports whether a writer's acquisition waits in the name's queue
// rather than polling: MySQL's lease mode, for a waiting Lock that is not
// a candidacy (elections keep their own polling).
func (drv *driver) queued(req backends.Request) bool {
	return drv.waits != nil && req.Wait && !req.Elect
}

// acquireQueued is a waiting writer's acquisition on MySQL: a try on the
// pool (the uncontended path), then the queue. While all of the Locker's
// queue connections wait in other queues it polls as before (WithRetry),
// and joins the queue as soon as one is free: a poller cannot take the row
// from a queue's head, so it must not stay outside for long.
func (drv *driver) acquireQueued(ctx context.Context, req backends.Request, h *leaseHold) error {
	refused := false // the server refused this acquisition a queue connection
	for attempt := 0; ; attempt++ {
		ok, err := drv.tryLease(ctx, drv.db, h, req.Name)
		switch {
		case err != nil:
			return err
		case ok:
			return nil
		}
		if !refused {
			select {
			case drv.queueSlots <- struct{}{}:
				err := drv.waitInQueue(ctx, req, h)
				<-drv.queueSlots
				if !errors.Is(err, errNoQueue) {
					return err
				}
				// No connection to wait on (the server's
				// max_connections, say): poll, as before.
				refused = true
				continue
			default:
			}
		}
		poll := req.Retry.NextBackoff(attempt)
		if poll < 0 {
			return backends.ErrNotAcquired
		}
		left, held, err := drv.remaining(ctx, h.key)
		if err != nil {
			return err
		}
		if held {
			poll = min(poll, left+time.Millisecond)
		}
		if err := sleep(ctx, poll, nil); err != nil {
			return err
		}
	}
}

// waitInQueue waits in the name's queue on a connection of the waits
// pool until it heads the queue, then tries the row on that connection
// until it takes it, and leaves the queue.
func (drv *driver) waitInQueue(ctx context.Context, req backends.Request, h *leaseHold) error {
	conn, err := drv.waits.Conn(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %w", errNoQueue, err)
	}
	bad := false
	defer func() {
		if bad {
			// It may still hold the queue lock: never let it back into
			// the pool.
			_ = conn.Raw(func(any) error { return sqldriver.ErrBadConn })
		}
		conn.Close()
	}()
	q := drv.queueKey(req.Name)
	head, err := drv.enterQueue(ctx, conn, q)
	if errors.Is(err, errNoQueue) {
		bad = true
		return err
	}
	if head {
		defer func() {
			lctx, cancel := drv.bound(context.WithoutCancel(ctx))
			defer cancel()
			var n sql.NullInt64
			if err := conn.QueryRowContext(lctx, drv.st.get("queue_leave"), q).Scan(&n); err != nil || n.Int64 != 1 {
				bad = true
			}
		}()
	}
	if err != nil {
		bad = bad || ctx.Err() == nil
		return err
	}
	for attempt := 0; ; attempt++ {
		ok, err := drv.tryLease(ctx, conn, h, req.Name)
		switch {
		case err != nil:
			bad = ctx.Err() == nil
			return err
		case ok:
			return nil
		}
		if req.Retry.NextBackoff(attempt) < 0 {
			return backends.ErrNotAcquired // the caller's retry policy gave up
		}
		left, held, err := drv.remaining(ctx, h.key)
		if err != nil {
			return err
		}
		delay := headPoll.NextBackoff(attempt)
		if held {
			delay = min(delay, left+time.Millisecond)
		}
		if err := sleep(ctx, delay, nil); err != nil {
			return err
		}
	}
}

// enterQueue waits on conn until it heads queue q, or ctx ends. A
// cancelled wait is ended on the server (queue_kill.sql, from the pool),
// so that the connection neither stays in the queue nor is lost. head
// reports whether conn holds the queue lock, even with an error.
func (drv *driver) enterQueue(ctx context.Context, conn *sql.Conn, q string) (head bool, err error) {
	idctx, cancel := drv.bound(ctx)
	var id int64
	err = conn.QueryRowContext(idctx, drv.st.get("queue_id")).Scan(&id)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		// The connection's first statement: it may never have connected.
		return false, fmt.Errorf("%w: %w", errNoQueue, err)
	}
	for {
		wait := queueChunk
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		secs := max(int64((wait+time.Second-1)/time.Second), 1)
		killed := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			defer close(killed)
			kctx, cancel := drv.bound(context.WithoutCancel(ctx))
			defer cancel()
			_, _ = drv.db.ExecContext(kctx, drv.st.get("queue_kill"), id)
		})
		// Bounded by the wait itself and a request timeout beyond it, not
		// by ctx: a cancelled wait is killed instead, which keeps the
		// connection.
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(secs)*time.Second+drv.reqTimeout())
		var got sql.NullInt64
		err = conn.QueryRowContext(qctx, drv.st.get("queue_enter"), q, secs).Scan(&got)
		cancel()
		if !stop() {
			<-killed // the kill is over: it cannot hit a later statement
		}
		head = err == nil && got.Valid && got.Int64 == 1
		switch {
		case head:
			return true, nil
		case ctx.Err() != nil:
			return false, ctx.Err()
		case err != nil:
			return false, drv.d.classify(qctx, "sql queue", err)
		case !got.Valid:
			return false, fmt.Errorf("sql queue: %w: GET_LOCK answered NULL", backends.ErrUnavailable)
		}
		// 0: the wait ran out; wait again.
	}
}

// reqTimeout is the request timeout, or the default.
func (drv *driver) reqTimeout() time.Duration {
	if drv.cfg.reqTimeout > 0 {
		return drv.cfg.reqTimeout
	}
	return driverkit.DefaultRequestTimeout
}
