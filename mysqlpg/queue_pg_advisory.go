package mysqlpg

import (
	"cmp"
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/padlock-go/padlock/backends"
)

// PostgreSQL's advisory mode queues its waiting writers as lease mode does
// (queue_pg.go), on the same queue lock: the try (advisory_acquire.sql)
// takes the name's advisory lock only while nobody holds the queue lock,
// or for the head, which skips the check. The lock must live on the name's
// holding session, not on the queue connection, so the head's try is a
// round trip of its own: a step on the queue connection joins the queue
// and says that the head waits (advisory_wait.sql, which also reads the
// token whose release to wait for), then the head tries on the session,
// and leaves the queue once it holds the name.

// queuedAdvisoryPG reports whether a writer's acquisition waits in the
// name's queue in PostgreSQL's advisory mode: a waiting Lock that is not
// a candidacy, on a table with the readers' columns.
func (drv *driver) queuedAdvisoryPG(req backends.Request) bool {
	return drv.d == postgres && drv.adv != nil && drv.notify != nil && drv.sharedErr == nil &&
		req.Wait && !req.Elect
}

// acquireQueuedPG is a waiting writer's acquisition in advisory mode on
// PostgreSQL: a try outside the queue (the uncontended path), then the
// queue. While every queue connection of the Locker waits in a queue, it
// waits outside as before (woken by releases, polling for holders whose
// session died, with tries that respect the queue), and joins the queue
// when it is handed the next connection that frees (slotLine).
func (a *advisory) acquireQueuedPG(ctx context.Context, h *advHold, req backends.Request) error {
	drv := a.drv
	try := func() (bool, error) {
		return a.gated(ctx, func(ctx context.Context) (bool, error) { return a.try(ctx, h, req.Name) })
	}
	ok, err := try()
	if err != nil || ok {
		return err
	}
	q := drv.queueKey(req.Name).(int64)
	claim := drv.queueSlot(ctx) // had while the listener starts
	w := drv.notify.watch(ctx, h.key)
	defer w.stop()
	var said time.Time
	return drv.queueOrWait(ctx, claim, func(qc *queueConn) error {
		return a.waitInQueuePG(ctx, qc, h, req.Name, q, w)
	}, func(attempt int, slot <-chan struct{}) (bool, error) {
		if time.Since(said) > interestRefresh {
			said = time.Now()
			if err := a.sayWaiting(ctx, h); err != nil {
				return false, err
			}
		} else if err := sleepOr(ctx, fallbackPoll.NextBackoff(attempt), w.c, slot); err != nil {
			return false, err
		}
		if closed(slot) {
			return false, nil // to the queue
		}
		return try()
	})
}

// waitInQueuePG waits in the name's queue on qc until it heads the queue,
// then tries on the name's session until it holds the name, leaves the
// queue and gives qc back.
func (a *advisory) waitInQueuePG(ctx context.Context, qc *queueConn, h *advHold, name string, q int64, w *waiter) error {
	drv := a.drv
	head := false
	defer func() { qc.close(ctx, q, head) }()
	var (
		said  time.Time // when the head last said that it waits
		token uint64    // the release it waits for
		// The head's step renews its note that it waits and keeps its
		// queue connection from its idle bound.
		refresh = min(interestRefresh, keepalive(h.ttl))
	)
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !head || time.Since(said) > refresh {
			var (
				joined  bool
				joinErr error
				marked  bool
				markErr error
				held    bool
			)
			step := time.Now()
			err := qc.pipeline(ctx, !head, h.ttl, func(p *queuePipe) {
				if !head {
					p.join(pgInt(q), pgBytea(h.key))
				}
				p.send("advisory_wait", pgBytea(h.key))
				p.sync()
				// Its own transaction, after the note that the head waits
				// is committed: a release after this look sees the note
				// and names its token (advisory_release.sql).
				p.send("advisory_held", pgInt(h.advKey.(int64)))
				p.sync()
			}, func(p *pgconn.Pipeline) error {
				if !head {
					var waited time.Duration
					if err := readJoin(p, &joined, &waited, &joinErr); err != nil {
						return err
					}
				}
				rows, err := readSegment(p, 1)
				switch {
				case isBroken(err):
					return err
				case err != nil:
					markErr = err
				case len(rows[0]) == 1:
					marked = true
					token, _ = strconv.ParseUint(string(rows[0][0][0]), 10, 64)
				}
				rows, err = readSegment(p, 1)
				switch {
				case isBroken(err):
					return err
				case err != nil:
					markErr = cmp.Or(markErr, err)
				case len(rows[0]) == 1:
					held = string(rows[0][0][0]) == "t"
				}
				return nil
			})
			qc.joined(joinErr)
			if err != nil {
				qc.bad = true
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return drv.d.classify(ctx, "sql queue", err)
			}
			head = head || joined
			switch {
			case joinErr != nil && !isLockTimeout(joinErr):
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return drv.d.classify(ctx, "sql queue", joinErr)
			case markErr != nil:
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return drv.d.classify(ctx, "sql wait", markErr)
			case !head:
				// The wait for the queue ran out: join again.
				if err := sleep(ctx, headPoll.NextBackoff(0), nil); err != nil {
					return err
				}
				continue
			}
			said = step
			if !marked {
				token = 0 // a name never taken: any release will do
			}
			if marked && held {
				// A writer holds the name: a try now is refused. Its
				// release wakes the head (it was told the head waits
				// before the look), or the poll finds a holder whose
				// session died.
				if err := drv.awaitRelease(ctx, w, token, min(fallbackPoll.NextBackoff(attempt), refresh), attempt); err != nil {
					return err
				}
			}
		}
		// The head: its try skips the queue's check.
		h.queueHead = true
		ok, err := a.gated(ctx, func(ctx context.Context) (bool, error) { return a.try(ctx, h, name) })
		h.queueHead = false
		switch {
		case err != nil:
			return err
		case ok:
			return nil // qc.close leaves the queue
		}
		// Refused: wait for the holder's release, a poll (a holder whose
		// session died is never announced) or the note's renewal.
		delay := min(fallbackPoll.NextBackoff(attempt), time.Until(said.Add(refresh)))
		if err := drv.awaitRelease(ctx, w, token, delay, attempt); err != nil {
			return err
		}
	}
}
