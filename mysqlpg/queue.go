package mysqlpg

import (
	"context"
	"crypto/sha256"
	"database/sql"
	sqldriver "database/sql/driver"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// MySQL's waiting writers queue on the server, in lease and advisory
// mode. MySQL has no LISTEN/NOTIFY; waiters that polled (10 ms doubling to
// 500 ms) rarely saw the name free when its holder locked again at once,
// and starved for seconds. Now a writer that finds the name held joins the
// name's queue: it waits in GET_LOCK for the name's queue lock (queueKey),
// on a connection of its own, and the server grants that lock to one
// waiter at a time, in the order asked. The holder of the queue lock heads
// the queue: it alone may take the name while anyone is queued, and it
// polls quickly since no other waiter polls. In lease mode the head tries
// the row on its queue connection (lease_acquire.sql takes a free row only
// for the connection that holds the queue lock, or for anyone while
// nobody is queued); in advisory mode it tries on the name's holding
// session, which is where the lock must live, naming its queue
// connection (advisory_try_acquire.sql takes the advisory lock only for
// that connection's id, or for anyone while nobody is queued). The head
// leaves the queue once it holds the name, which makes the next waiter
// the head. A client that locks again right after its release finds the
// queue lock taken and queues behind the others. A waiter whose
// connection dies leaves the queue with it.

// maxQueued bounds the connections a Locker keeps waiting in queues (its
// waits pool, beside the pool of pool_max_conns that holds and releases
// use): a Locker uses at most pool_max_conns + maxQueued connections.
// Waiters beyond it poll until one is free (acquireQueued).
const maxQueued = 2

// headPoll paces the head's tries while the name is held: the head is the
// only waiter that polls, so it can poll often.
var headPoll = backends.ExponentialBackoff(time.Millisecond, 20*time.Millisecond)

// queueChunk bounds one GET_LOCK wait, so that a wait without a deadline
// still looks at its context now and then, and a wait whose path went
// silent (GET_LOCK sent, no answer ever) is given up within a chunk and a
// request timeout: with 30s chunks a waiter on a silent path waited 35s
// (ServerSilent, MySQL over TLS). A waiter asks again at each chunk's end,
// which may let a later waiter ahead of one that has waited longer than
// a chunk.
const queueChunk = driverkit.DefaultRequestTimeout

// errNoQueue is a queue connection that could not be had or failed at
// once: the waiter polls instead.
var errNoQueue = errors.New("mysqlpg: no connection to wait in the queue on")

// errQueueConnLost is a queue connection that may still hold a lock it
// must not: it is never let back into the pool.
var errQueueConnLost = errors.New("mysqlpg: queue connection left in doubt")

// queueKey is the lock of a name's queue: on MySQL a GET_LOCK name (named
// locks are per server, so it covers the table's identity, as advisoryKey
// does; 64 characters at most), on PostgreSQL an advisory lock key (per
// database; 64 bits).
func (drv *driver) queueKey(name string) any {
	sum := sha256.Sum256([]byte(drv.ident + "\x00queue\x00" + name))
	if drv.d == postgres {
		return int64(binary.BigEndian.Uint64(sum[:8]))
	}
	return "padlock-q:" + hex.EncodeToString(sum[:])[:54]
}

// queued reports whether a writer's acquisition waits in the name's queue
// rather than polling: MySQL, for a waiting Lock that is not a candidacy
// (elections keep their own polling), in both modes. PostgreSQL's lease
// mode queues too, on its own path (queuedPG).
func (drv *driver) queued(req backends.Request) bool {
	return drv.d != postgres && req.Wait && !req.Elect
}

// queueTry is one try of a queued writer. Outside the queue qc is nil and
// qid 0; once the waiter heads the queue, qc is its queue connection,
// which holds the queue lock, and qid that connection's id on the server.
type queueTry func(ctx context.Context, qc *sql.Conn, qid int64) (bool, error)

// headWaiter is what a queue's head does after a refused try, before its
// back-off: waitReleased in advisory mode (nil in lease mode, whose
// holders hold no lock to wait on). waited: try again at once.
type headWaiter func(ctx context.Context, qc *sql.Conn, qid int64) (waited bool, err error)

// leaseLeft reports how long the name's holder has left (lease mode), to
// cap a poll's delay; nil in advisory mode, whose holds have no lease on
// the server.
type leaseLeft func(ctx context.Context) (left time.Duration, held bool, err error)

// acquireQueued is a waiting writer's acquisition on MySQL: a try outside
// the queue (the uncontended path), then the queue. While all of the
// Locker's queue connections wait in other queues it polls as before
// (WithRetry), in line for the next free one (slotLine), and joins the
// queue when it is handed one: a poller cannot take the name from a
// queue's head, so it must not stay outside for long.
func (drv *driver) acquireQueued(ctx context.Context, req backends.Request, try queueTry, left leaseLeft, wait headWaiter) error {
	var turn chan struct{} // this acquisition's place in line for a queue slot
	defer func() {
		if turn != nil {
			drv.queueSlots.cancel(turn)
		}
	}()
	refused := false // the server refused this acquisition a queue connection
	for attempt := 0; ; attempt++ {
		if !closed(turn) { // handed a slot during the poll: to the queue
			ok, err := try(ctx, nil, 0)
			switch {
			case err != nil:
				return err
			case ok:
				return nil
			}
		}
		if !refused && turn == nil {
			turn = drv.queueSlots.take()
		}
		if closed(turn) {
			turn = nil
			err := drv.waitInQueue(ctx, req, try, left, wait)
			drv.queueSlots.give()
			if !errors.Is(err, errNoQueue) {
				return err
			}
			// No connection to wait on (the server's max_connections,
			// say): poll, as before.
			refused = true
			continue
		}
		poll := req.Retry.NextBackoff(attempt)
		if poll < 0 {
			return backends.ErrNotAcquired
		}
		poll, err := capped(ctx, poll, left)
		if err != nil {
			return err
		}
		if err := sleepOr(ctx, poll, nil, turn); err != nil {
			return err
		}
	}
}

// capped caps a poll's delay at the holder's lease left, if left tells it.
func capped(ctx context.Context, delay time.Duration, left leaseLeft) (time.Duration, error) {
	if left == nil {
		return delay, nil
	}
	d, held, err := left(ctx)
	if err != nil {
		return 0, err
	}
	if held {
		delay = min(delay, d+time.Millisecond)
	}
	return delay, nil
}

// waitInQueue waits in the name's queue on a connection of the waits
// pool until it heads the queue, then tries until it takes the name, and
// leaves the queue.
func (drv *driver) waitInQueue(ctx context.Context, req backends.Request, try queueTry, left leaseLeft, wait headWaiter) error {
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
	// Its silence bounded on the server by the lease, as a holding
	// session's is (queue_setup.sql).
	sctx, cancel := drv.bound(ctx)
	_, err = conn.ExecContext(sctx, drv.st.get("queue_setup"), drv.d.idleTimeout(req.TTL))
	cancel()
	if err != nil {
		bad = true
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The connection's first statement: it may never have connected.
		return fmt.Errorf("%w: %w", errNoQueue, err)
	}
	q := drv.queueKey(req.Name).(string)
	head, qid, err := drv.enterQueue(ctx, conn, q)
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
	polls := 0 // tries refused with no wait on the server: the backoff's
	for attempt := 0; ; attempt++ {
		ok, err := try(ctx, conn, qid)
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
		if wait != nil {
			waited, err := wait(ctx, conn, qid)
			if err != nil {
				bad = ctx.Err() == nil || errors.Is(err, errQueueConnLost)
				return err
			}
			if waited {
				continue
			}
		}
		delay, err := capped(ctx, headPoll.NextBackoff(polls), left)
		if err != nil {
			return err
		}
		polls++
		if err := sleep(ctx, delay, nil); err != nil {
			return err
		}
	}
}

// headWait is the longest a head waits on the server for a release in one
// statement (waitReleased), and no longer than its context's deadline.
const headWait = time.Second

// waitReleased is the wait of a name's queue head in advisory mode, on its
// queue connection conn (id on the server), for the name's advisory key
// to be released, at most headWait: MySQL wakes a GET_LOCK waiter at the
// holder's release, so the head tries again as soon as the holder lets go
// instead of polling for it (queue_head_wait.sql). The key is taken and
// given back in the same statement, and no other writer may take a free
// name while anyone is queued. It reports
// whether it waited: a free key (readers or permits hold the name, which
// they do under other keys, or the holder has just let go) is no wait,
// and the head backs off as before. A cancelled wait is killed, as a
// wait to enter the queue is; a wait that ended in doubt (cancelled, or
// failed) gives the key back, or leaves conn in doubt (errQueueConnLost).
func (drv *driver) waitReleased(ctx context.Context, conn *sql.Conn, id int64, key any) (bool, error) {
	// One request's bound for the whole statement, as a poll's try has,
	// so that a silent path is found as soon; the wait is half of it.
	wait := min(headWait, drv.reqTimeout()/2)
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl))
	}
	if wait <= 0 {
		return false, ctx.Err()
	}
	stop := drv.killOnCancel(ctx, id)
	qctx, cancel := driverkit.WithRequestTimeout(context.WithoutCancel(ctx), drv.reqTimeout())
	defer cancel() // after the error's classification, which reads it
	var got sql.NullInt64
	err := conn.QueryRowContext(qctx, drv.st.get("queue_head_wait"), key, key, wait.Seconds(), key).Scan(&got)
	stop()
	if err == nil && qctx.Err() != nil {
		err = context.Cause(qctx)
	}
	switch {
	case err == nil && ctx.Err() == nil:
		// Only a release it waited for is a wait (1): a wait that ran out
		// (0) backs off before the next try like a free key (-1), since
		// MySQL, unlike MariaDB, counts GET_LOCK's timeout in whole
		// seconds and reads one under half a second as 0, no wait at all
		// (a request timeout under a second, or a deadline's last half
		// second): the head tried, and asked again, with no pause.
		return got.Valid && got.Int64 == 1, nil
	case qctx.Err() != nil && ctx.Err() != nil:
		return false, fmt.Errorf("%w (%w)", ctx.Err(), errQueueConnLost)
	case qctx.Err() != nil || ctx.Err() == nil:
		// No answer, or the connection failed: it may still hold the
		// key, and is never used again (the server frees its locks once
		// it sees it gone).
		return false, fmt.Errorf("%w (%w)", drv.d.classify(qctx, "sql queue", err), errQueueConnLost)
	}
	// Cancelled: the kill ended the statement, perhaps between taking
	// the key and giving it back. Give it back (the statement that gives
	// a queue lock back gives any named lock back), or let the
	// connection go.
	lctx, lcancel := drv.bound(context.WithoutCancel(ctx))
	var released sql.NullInt64
	rerr := conn.QueryRowContext(lctx, drv.st.get("queue_leave"), key).Scan(&released)
	lcancel()
	if rerr != nil {
		return false, fmt.Errorf("%w (%w)", ctx.Err(), errQueueConnLost)
	}
	return false, ctx.Err()
}

// enterQueue waits on conn until it heads queue q, or ctx ends. A
// cancelled wait is ended on the server (queue_kill.sql, killOnCancel),
// so that the connection neither stays in the queue nor is lost. head
// reports whether conn holds the queue lock, even with an error; id is
// conn's id on the server.
func (drv *driver) enterQueue(ctx context.Context, conn *sql.Conn, q string) (head bool, id int64, err error) {
	idctx, cancel := drv.bound(ctx)
	err = conn.QueryRowContext(idctx, drv.st.get("queue_id")).Scan(&id)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return false, 0, ctx.Err()
		}
		// The connection's first statement: it may never have connected.
		return false, 0, fmt.Errorf("%w: %w", errNoQueue, err)
	}
	for {
		wait := queueChunk
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		secs := max(int64((wait+time.Second-1)/time.Second), 1)
		stop := drv.killOnCancel(ctx, id)
		// Bounded by the wait itself and a request timeout beyond it, not
		// by ctx: a cancelled wait is killed instead, which keeps the
		// connection.
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(secs)*time.Second+drv.reqTimeout())
		var got sql.NullInt64
		err = conn.QueryRowContext(qctx, drv.st.get("queue_enter"), q, secs).Scan(&got)
		cancel()
		stop()
		head = err == nil && got.Valid && got.Int64 == 1
		switch {
		case head:
			return true, id, nil
		case ctx.Err() != nil:
			return false, id, ctx.Err()
		case err != nil:
			return false, id, drv.d.classify(qctx, "sql queue", err)
		case !got.Valid:
			return false, id, fmt.Errorf("sql queue: %w: GET_LOCK answered NULL", backends.ErrUnavailable)
		}
		// 0: the wait ran out; wait again.
	}
}

// killOnCancel ends the statement that connection id runs (queue_kill.sql)
// once ctx is done: a cancelled wait in a queue, whose connection stays.
// The kill goes on a connection dialled for it and closed after, not one
// of the pool's, which a Locker's holding sessions may all have (advisory
// mode pins one per session): with the pool's, a cancelled or timed-out
// wait returned only once a connection freed, up to a request timeout
// later. The function it returns stops that, or waits until the kill is
// over, so that the kill cannot hit a later statement.
func (drv *driver) killOnCancel(ctx context.Context, id int64) func() {
	killed := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(killed)
		kctx, cancel := drv.bound(context.WithoutCancel(ctx))
		defer cancel()
		db := sql.OpenDB(drv.cfg.connector)
		db.SetMaxIdleConns(0)
		defer db.Close()
		_, _ = db.ExecContext(kctx, drv.st.get("queue_kill"), id)
	})
	return func() {
		if !stop() {
			<-killed
		}
	}
}

// reqTimeout is the request timeout, or the default.
func (drv *driver) reqTimeout() time.Duration {
	if drv.cfg.reqTimeout > 0 {
		return drv.cfg.reqTimeout
	}
	return driverkit.DefaultRequestTimeout
}
