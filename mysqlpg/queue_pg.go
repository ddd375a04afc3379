package mysqlpg

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// PostgreSQL's waiting writers queue on the server, as
// MySQL's do (queue.go), and one of them is woken per release. Before,
// every waiter listened for the name's release and every one tried at
// each: the round trips per acquisition grew with the waiters, and the
// name went to whichever try came first.
//
// Now a writer that finds the name held waits for the name's queue lock,
// an advisory lock (queueKey) that the server grants one session at a
// time, in the order asked, on a connection of the Locker's waits pool.
// Its holder heads the queue: lease_acquire.sql gives a free row to the
// session that holds the queue lock, or to anyone while nobody does. The
// head alone waits for the name: for the release of the holder it saw
// (the release's NOTIFY names the token released, so an earlier release
// whose wake-up is still buffered does not count) or for the holder's
// lease to run out. Each of the head's steps is one pipeline of implicit
// transactions, one round trip: join the queue (the first step only),
// try, say that it waits if refused, leave the queue if granted. With W
// writers waiting an acquisition costs four round trips: the arrival's
// try, the step that joins the queue, the step that takes the name, and
// the release.

// queuedPG reports whether a writer's acquisition waits in the name's
// queue on PostgreSQL: a waiting Lock in lease mode that is not a
// candidacy, on a table with the readers' columns (the queue refuses a
// writer while permits of another limit hold the name).
func (drv *driver) queuedPG(req backends.Request) bool {
	return drv.d == postgres && drv.adv == nil && drv.notify != nil && drv.sharedErr == nil &&
		req.Wait && !req.Elect
}

// acquireLeasePG is a waiting writer's acquisition on PostgreSQL in lease
// mode: a try outside the queue (the uncontended path), then the queue.
// While every queue connection of the Locker waits in a queue, it waits
// outside (woken by releases, with tries that respect the queue), in line
// for the next connection that frees (slotLine), and joins the queue when
// it is handed one.
func (drv *driver) acquireLeasePG(ctx context.Context, req backends.Request, h *leaseHold) error {
	ok, err := drv.tryLease(ctx, drv.db, h, req.Name, false)
	if err != nil || ok {
		return err
	}
	q := drv.queueKey(req.Name).(int64)
	// Listening before the queue's first step: a release after the step
	// said that it waits would otherwise go unseen. The queue connection
	// is had meanwhile.
	claim := drv.queueSlot(ctx)
	w := drv.notify.watch(ctx, h.key)
	defer w.stop()
	refusedFree := 0 // tries in a row refused while the name was free
	return drv.queueOrWait(ctx, claim, func(qc *queueConn) error {
		return drv.waitInQueuePG(ctx, qc, h, req.Name, q, w)
	}, func(attempt int, slot <-chan struct{}) (bool, error) {
		left, held, err := drv.remaining(ctx, h.key)
		switch {
		case err != nil:
			return false, err
		case held:
			refusedFree = 0
			if err := drv.waitSlot(ctx, w, slot, req.Retry, attempt, left); err != nil {
				return false, err
			}
		case refusedFree > 0:
			// Free, yet the last try was refused: a queue's head holds
			// the queue and is taking the name, which sends no
			// notification. Paced, not at once: a waiter outside the
			// queue would otherwise ask again and again, taking the
			// pool's connections from the holders' releases.
			if err := sleepOr(ctx, headPoll.NextBackoff(refusedFree-1), nil, slot); err != nil {
				return false, err
			}
		}
		if closed(slot) {
			return false, nil // to the queue
		}
		ok, err := drv.tryLease(ctx, drv.db, h, req.Name, true)
		if err == nil && !ok && !held {
			refusedFree++
		}
		return ok, err
	})
}

// queueOrWait runs a waiting writer's acquisition on PostgreSQL: inQueue
// on the queue connection of claim (the caller's place in line for one);
// meanwhile, and for good if the server refuses it a connection, outside,
// one wait and try per call, until it grants the name. outside's waits end
// early when slot (nil: never) closes: the claim's connection is there.
func (drv *driver) queueOrWait(ctx context.Context, claim *slotClaim,
	inQueue func(*queueConn) error, outside func(attempt int, slot <-chan struct{}) (bool, error)) error {
	defer func() {
		if claim != nil {
			claim.drop(ctx)
		}
	}()
	for attempt := 0; ; attempt++ {
		if claim != nil && (claim.now || closed(claim.ready)) {
			// The slot is ours (or was free when asked: the wait is
			// the connection's dial, as long as the listener's).
			<-claim.ready
			claim.cancel()
			r := claim.res
			claim = nil
			if r.err == nil {
				return inQueue(r.qc)
			}
			if !errors.Is(r.err, errNoQueue) {
				return r.err
			}
			// Refused a connection: outside from now on.
		}
		var slot <-chan struct{}
		if claim != nil {
			slot = claim.ready
		}
		if ok, err := outside(attempt, slot); err != nil || ok {
			return err
		}
	}
}

// keepalive is how long a queue's head may wait without a step: a third of
// its lease, which bounds its queue connection's idle time (a head whose
// client went silent leaves the queue within it).
func keepalive(ttl time.Duration) time.Duration {
	return max(ttl/3, time.Millisecond)
}

// queueStep is what one of the head's pipelines found.
type queueStep struct {
	joined  bool          // the queue's lock was granted in this step
	waited  time.Duration // how long that took, on the server's clock
	joinErr error         // the wait for the queue's lock failed (its timeout, a cancel)
	granted bool
	token   uint64
	tryErr  error
	marked  bool          // the name is held by another, now told that someone waits
	left    time.Duration // its lease left; -1: the name is in advisory mode
	holder  uint64        // its token, whose release the head waits for
	lim     int64         // the limit of a group that holds it; 0: none
	markErr error
	leftQ   bool // granted, and left the queue
}

// waitInQueuePG waits in the name's queue on qc until it heads the queue
// and takes the name; it gives qc back.
func (drv *driver) waitInQueuePG(ctx context.Context, qc *queueConn, h *leaseHold, name string, q int64, w *waiter) error {
	head, granted := false, false
	defer func() { qc.close(ctx, q, head && !granted) }()
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		sent := time.Now()
		r, err := qc.leaseStep(ctx, h, name, q, !head)
		qc.joined(r.joinErr)
		if err != nil {
			// The pipeline broke: the connection goes, and with it its
			// place in the queue; the try may have been applied.
			qc.bad = true
			err = drv.d.classify(ctx, "sql queue", err)
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			drv.releaseLater(h)
			// The server may still run the pipeline it received, its
			// client gone: a grant after the release above would stand
			// until its lease ran out. Once the queue's wait it could be
			// in has ended, release again.
			time.AfterFunc(queueChunk+drv.reqTimeout(), func() { drv.releaseLater(h) })
			return err
		}
		if r.joined {
			head = true
			sent = sent.Add(r.waited) // the try was sent no sooner than this
		}
		switch {
		case r.granted:
			granted = true
			qc.bad = qc.bad || head && !r.leftQ // it may still hold the queue's lock
			h.token, h.grant = r.token, backends.Grant{Sent: sent, TTL: h.ttl}
			if err := ctx.Err(); err != nil {
				drv.janitor.Settle(func(ctx context.Context) error { return h.Release(ctx) })
				return err
			}
			return nil
		case r.tryErr != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return drv.d.classify(ctx, "sql acquire", r.tryErr)
		case r.markErr != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return drv.d.classify(ctx, "sql wait", r.markErr)
		case r.marked && r.left < 0:
			return drv.errAdvisoryName()
		case r.marked && r.lim > 1:
			return driverkit.LimitMismatch(name, int(r.lim), 1)
		case r.joinErr != nil && !isLockTimeout(r.joinErr):
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return drv.d.classify(ctx, "sql queue", r.joinErr)
		}
		switch {
		case !head:
			// Not yet at the head (the wait for the queue ran out, or the
			// limit's check refused it and the group left since): the next
			// step, paced.
			if err := sleep(ctx, headPoll.NextBackoff(0), nil); err != nil {
				return err
			}
			continue
		case !r.marked:
			// The holder released between the try and the mark: the
			// next step at once.
			continue
		}
		// The head, refused: wait for the holder's release or the end of
		// its lease.
		if err := drv.awaitRelease(ctx, w, r.holder, min(r.left+time.Millisecond, keepalive(h.ttl)), attempt); err != nil {
			return err
		}
	}
}

// awaitRelease waits until the release of token (or of a later holder)
// wakes w, delay passes (the holder's lease running out, the head's
// keepalive), or, while the listening connection is down, the next poll.
func (drv *driver) awaitRelease(ctx context.Context, w *waiter, token uint64, delay time.Duration, attempt int) error {
	if !w.listening() {
		delay = min(delay, headPoll.NextBackoff(attempt))
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	for !w.releasedSince(token) {
		select {
		case <-w.c:
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// leaseStep sends one of a lease-mode head's steps in one round trip,
// each part its own implicit transaction: join the queue if join is set,
// try the name, say that it waits if refused, leave the queue if granted.
func (qc *queueConn) leaseStep(ctx context.Context, h *leaseHold, name string, q int64, join bool) (queueStep, error) {
	var r queueStep
	drv := qc.drv
	qa, key, owner := pgInt(q), pgBytea(h.key), []byte(h.owner)
	var holder []byte // NULL without an owner
	if h.holder != "" {
		holder = []byte(h.holder)
	}
	err := qc.pipeline(ctx, join, h.ttl, func(p *queuePipe) {
		if join {
			p.join(qa, key)
		}
		p.send("lease_acquire", key, []byte(name), owner, []byte(drv.host), pgInt(int64(drv.pid)),
			pgInt(h.ttl.Microseconds()), holder, qa)
		p.sync()
		p.send("queue_mark", key, owner)
		p.sync()
		p.send("queue_leave", qa, key, owner)
		p.sync()
	}, func(p *pgconn.Pipeline) error {
		if join {
			if err := readJoin(p, &r.joined, &r.waited, &r.joinErr); err != nil {
				return err
			}
		}
		return readLeaseStep(p, &r)
	})
	return r, err
}

// readLeaseStep reads a lease-mode step's results after its join.
func readLeaseStep(p *pgconn.Pipeline, r *queueStep) error {
	rows, err := readSegment(p, 1)
	switch {
	case isBroken(err):
		return err
	case err != nil:
		r.tryErr = err
	case len(rows[0]) == 1:
		r.granted = true
		r.token, _ = strconv.ParseUint(string(rows[0][0][0]), 10, 64)
	}
	rows, err = readSegment(p, 1)
	switch {
	case isBroken(err):
		return err
	case err != nil:
		r.markErr = err
	case len(rows[0]) == 1:
		row := rows[0][0]
		r.marked = true
		us, _ := strconv.ParseInt(string(row[0]), 10, 64)
		r.left = time.Duration(us) * time.Microsecond
		if us < 0 {
			r.left = -1
		}
		r.holder, _ = strconv.ParseUint(string(row[1]), 10, 64)
		if row[2] != nil {
			r.lim, _ = strconv.ParseInt(string(row[2]), 10, 64)
		}
	}
	rows, err = readSegment(p, 1)
	switch {
	case isBroken(err):
		return err
	case err == nil && len(rows[0]) == 1:
		r.leftQ = string(rows[0][0][0]) == "t" // else still queued, or in doubt: leftQ false
	}
	return nil
}
