package mysqlpg

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// queueConn is one connection of the waits pool on PostgreSQL, on which an
// acquisition waits in a name's queue (queue_pg.go). bad says that it may
// still hold a queue's lock, or its state is in doubt: it is closed
// instead of going back to the pool, and the server frees its locks.
//
// doubt says that its last wait for a queue's lock failed (lock_timeout,
// or a cancel), which does not mean that the lock was not granted:
// PostgreSQL grants an awaited lock even as it raises the timeout or the
// cancel (LockErrorCleanup), and a session-level advisory lock outlives
// the failed statement. A join after that would count the session's hold
// twice, and the one unlock of the queue's leave would leave the queue
// locked with nobody in it, refusing every other waiter's try. So the
// next join first lets go of every lock the connection has
// (queue_unlock_all.sql: it only ever holds queue locks), and a
// connection that goes back in doubt is closed instead.
type queueConn struct {
	drv   *driver
	conn  *sql.Conn
	bad   bool
	doubt bool
}

// joined records what a step's join found: a failed wait leaves the
// connection in doubt until its next join (see queueConn).
func (qc *queueConn) joined(joinErr error) {
	if joinErr != nil {
		qc.doubt = true
	}
}

// queueConnResult is a queue connection, or why none was had.
type queueConnResult struct {
	qc  *queueConn
	err error
}

// slotClaim is an acquisition's place in line for one of the Locker's
// queue slots (slotLine), and then the slot's connection, had in the
// background: a Locker's first contended wait dials the listening
// connection and a queue connection, and one after the other they would
// put the waiter two dials back in the queue.
type slotClaim struct {
	ready  chan struct{} // closed once res is set
	res    queueConnResult
	now    bool // the slot was free when asked: the wait for it is a dial's
	cancel context.CancelFunc
}

// queueSlot asks for a queue slot and its connection. The slot goes back
// with the connection (queueConn.close), at once if none was had, or with
// drop.
func (drv *driver) queueSlot(ctx context.Context) *slotClaim {
	cctx, cancel := context.WithCancel(ctx)
	c := &slotClaim{ready: make(chan struct{}), cancel: cancel}
	turn := drv.queueSlots.take()
	c.now = closed(turn)
	go func() {
		defer close(c.ready)
		select {
		case <-turn:
		case <-cctx.Done():
			drv.queueSlots.cancel(turn)
			c.res.err = cctx.Err()
			return
		}
		qc, err := drv.queueConn(cctx)
		if err != nil {
			drv.queueSlots.give()
		}
		c.res = queueConnResult{qc, err}
	}()
	return c
}

// drop withdraws a claim its acquisition no longer needs (granted outside
// the queue, or gone): its place in line, or the slot and connection it
// was had.
func (c *slotClaim) drop(ctx context.Context) {
	c.cancel()
	<-c.ready
	if c.res.qc != nil {
		c.res.qc.close(ctx, 0, false)
	}
}

// queueConn takes a connection of the waits pool; errNoQueue if none can
// be had.
func (drv *driver) queueConn(ctx context.Context) (*queueConn, error) {
	conn, err := drv.waits.Conn(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %w", errNoQueue, err)
	}
	qc := &queueConn{drv: drv, conn: conn}
	if err := conn.Raw(func(dc any) error {
		_, err := pgxConn(dc)
		return err
	}); err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: %w", errNoQueue, err)
	}
	return qc, nil
}

// pgxConn is the pgx connection under a pooled connection.
func pgxConn(dc any) (*pgconn.PgConn, error) {
	sc, ok := dc.(*stdlib.Conn)
	if !ok {
		return nil, fmt.Errorf("mysqlpg: a PostgreSQL connection of type %T, not pgx's", dc)
	}
	return sc.Conn().PgConn(), nil
}

// close returns the connection to the pool, leaving queue q first if
// inQueue says it is still in it (on failure the connection is closed),
// and frees its queue slot.
func (qc *queueConn) close(ctx context.Context, q int64, inQueue bool) {
	if inQueue && !qc.bad {
		lctx, cancel := qc.drv.bound(context.WithoutCancel(ctx))
		var ok sql.NullBool
		if err := queryRow(lctx, qc.drv.d, qc.conn, qc.drv.st.get("advisory_unlock"), []any{q}, &ok); err != nil || !ok.Bool {
			qc.bad = true
		}
		cancel()
	}
	if qc.bad || qc.doubt {
		_ = qc.conn.Raw(func(any) error { return sqldriver.ErrBadConn })
	}
	qc.conn.Close()
	qc.drv.queueSlots.give()
}

// queuePipe builds one pipeline: statements by name, each segment ended
// by a sync (its own implicit transaction).
type queuePipe struct {
	p    *pgconn.Pipeline
	drv  *driver
	wait time.Duration // the bound of a wait for the queue
	idle time.Duration // the bound of the connection's idle time
}

func (qp *queuePipe) send(stmt string, args ...[]byte) {
	qp.p.SendQueryPrepared(qp.stmtName(stmt), args, nil, nil)
}

// stmtName is the name under which a queue connection prepares one of
// queueStatements (a connection serves one Locker, so one table).
func (qp *queuePipe) stmtName(stmt string) string { return "padlock_q_" + stmt }

func (qp *queuePipe) sync() { qp.p.SendPipelineSync() }

// join sends the segment that joins queue q (its argument form qa), for
// the writer of row key key: the wait's and the idle time's bounds, the
// wait (refused while permits of another limit hold the name), and how
// long it took.
func (qp *queuePipe) join(qa, key []byte) {
	qp.send("queue_timeout", pgInt(max(qp.wait.Milliseconds(), 1)), pgInt(max(qp.idle.Milliseconds(), 1)))
	qp.send("queue_enter", qa, key)
	qp.send("queue_waited")
	qp.sync()
}

// queueStatements are the statements of the queue's steps, prepared once
// per connection (queueConn.pipeline).
var queueStatements = []string{"queue_timeout", "queue_enter", "queue_waited", "lease_acquire", "queue_mark",
	"queue_leave", "advisory_wait", "advisory_held", "queue_unlock_all"}

// pipeline sends what build adds as one pipeline, in one round trip, and
// reads its results with read. join says that it waits for a queue: its
// bound is then the wait's (queueChunk, or less to ctx's deadline) and a
// request timeout, else a request timeout; ttl is the waiter's lease, the
// bound of the connection's idle time that joining sets. A cancelled ctx cancels the
// statement that runs (cancelOnDone: a cancel request, on a connection of its own), which keeps the
// connection. The error is the pipeline's, after which the connection
// cannot be trusted; a statement's own error is read by read.
func (qc *queueConn) pipeline(ctx context.Context, join bool, ttl time.Duration, build func(*queuePipe), read func(*pgconn.Pipeline) error) error {
	drv := qc.drv
	wait := queueChunk
	if dl, ok := ctx.Deadline(); ok {
		wait = max(min(wait, time.Until(dl)), time.Millisecond)
	}
	bound := drv.reqTimeout()
	if join {
		bound += wait
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	return qc.conn.Raw(func(dc any) error {
		pc, err := pgxConn(dc)
		if err != nil {
			return err
		}
		defer drv.cancelOnDone(ctx, pc)()
		qp := &queuePipe{p: pc.StartPipeline(pctx), drv: drv, wait: wait, idle: ttl}
		// The statements are prepared once per connection, in the
		// pipeline of its first step: a step is then parsed and planned
		// only the first time, without a round trip of its own.
		fresh := !drv.queuePrep.has(pc)
		if fresh {
			for _, name := range queueStatements {
				qp.p.SendPrepare(qp.stmtName(name), drv.st.get(name), nil)
				qp.p.SendPipelineSync()
			}
		}
		clear := join && qc.doubt
		if clear {
			qp.send("queue_unlock_all")
			qp.sync()
		}
		build(qp)
		if err := qp.p.Flush(); err != nil {
			qp.p.Close()
			return err
		}
		if fresh {
			if err := readPrepared(qp.p); err != nil {
				qp.p.Close()
				return err
			}
		}
		if clear {
			if _, err := readSegment(qp.p, 1); err != nil {
				qp.p.Close()
				return err
			}
			qc.doubt = false
		}
		err = read(qp.p)
		if cerr := qp.p.Close(); err == nil && cerr != nil && !isPgError(cerr) {
			err = cerr
		}
		if err == nil && fresh {
			drv.queuePrep.add(pc)
		}
		return err
	})
}

// cancelOnDone ends the statement that pc runs once ctx is done, with
// PostgreSQL's cancel request, which goes on a connection of its own: not
// one of the pool's, which a Locker's holding sessions may all have
// (advisory mode pins one per session), so that a cancelled or timed-out
// wait in a queue returns then, not a request timeout later. The
// connection stays. The function it returns stops that, or waits until
// the request is over, so that it cannot hit a later statement.
func (drv *driver) cancelOnDone(ctx context.Context, pc *pgconn.PgConn) func() {
	sent := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(sent)
		cctx, cancel := drv.bound(context.WithoutCancel(ctx))
		defer cancel()
		_ = pc.CancelRequest(cctx)
	})
	return func() {
		if !stop() {
			<-sent
		}
	}
}

// readPrepared reads the results of the statements' preparation, each in
// a segment of its own: one that exists already (42P05) is fine.
func readPrepared(p *pgconn.Pipeline) error {
	for range queueStatements {
		_, err := p.GetResults()
		var pe *pgconn.PgError
		if err != nil && !(errors.As(err, &pe) && pe.Code == "42P05") {
			return err
		}
		if _, err := p.GetResults(); err != nil { // its sync
			return err
		}
	}
	return nil
}

// queuePrepared remembers the queue connections on which the queue's
// statements are prepared. It keeps a few (a Locker's waits pool has
// two); forgetting one costs a preparation that finds them there.
type queuePrepared struct {
	mu    sync.Mutex
	conns map[*pgconn.PgConn]bool
}

func (qp *queuePrepared) has(pc *pgconn.PgConn) bool {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.conns[pc]
}

func (qp *queuePrepared) add(pc *pgconn.PgConn) {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.conns == nil || len(qp.conns) >= 2*maxQueued {
		qp.conns = map[*pgconn.PgConn]bool{} // those of closed connections go too
	}
	qp.conns[pc] = true
}

// readJoin reads a join segment: whether the queue's lock was granted,
// how long that took, or why not (the wait's bound, a cancel).
func readJoin(p *pgconn.Pipeline, joined *bool, waited *time.Duration, joinErr *error) error {
	rows, err := readSegment(p, 3)
	switch {
	case isBroken(err):
		return err
	case err != nil && len(rows) < 2:
		*joinErr = err // not joined
	case len(rows[1]) == 1:
		*joined = true
		if len(rows) == 3 && len(rows[2]) == 1 {
			us, _ := strconv.ParseInt(string(rows[2][0][0]), 10, 64)
			*waited = time.Duration(max(us, 0)) * time.Microsecond
		}
	}
	return nil
}

// pgInt and pgBytea are arguments in PostgreSQL's text form.
func pgInt(n int64) []byte { return []byte(strconv.FormatInt(n, 10)) }

func pgBytea(b []byte) []byte { return []byte(`\x` + hex.EncodeToString(b)) }

// isLockTimeout reports whether err is PostgreSQL's lock_timeout.
func isLockTimeout(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55P03"
}

// readSegment reads the results of a pipeline's segment of n statements
// and its sync: the rows of each statement, up to the first that failed,
// and that statement's error. The server skips a failed statement's
// followers up to the sync.
func readSegment(p *pgconn.Pipeline, n int) ([][][][]byte, error) {
	var (
		out     [][][][]byte
		stmtErr error
	)
	for range n {
		res, err := p.GetResults()
		if err != nil {
			stmtErr = err
			break
		}
		rr, ok := res.(*pgconn.ResultReader)
		if !ok {
			return nil, fmt.Errorf("mysqlpg: a pipeline answered %T, not a statement's result", res)
		}
		rs := rr.Read()
		if rs.Err != nil {
			stmtErr = rs.Err
			break
		}
		out = append(out, rs.Rows)
	}
	if isBroken(stmtErr) {
		return nil, stmtErr
	}
	res, err := p.GetResults()
	if err != nil {
		return nil, err
	}
	if _, ok := res.(*pgconn.PipelineSync); !ok {
		return nil, fmt.Errorf("mysqlpg: a pipeline answered %T, not its sync", res)
	}
	return out, stmtErr
}

// isPgError reports whether err is a statement's error from the server,
// after which the connection is still usable.
func isPgError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}

// isBroken reports whether err broke a pipeline (not a statement's error).
func isBroken(err error) bool {
	return err != nil && !isPgError(err)
}
