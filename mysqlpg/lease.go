package mysqlpg

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// leaseHold is one lease-mode acquisition: its row, while the row names
// its owner id and has not expired. A writer's row is the name row; a
// reader's or a permit's is a slot row of its own (shared.go).
type leaseHold struct {
	drv    *driver
	key    []byte // sha256 of the name: the name row's primary key
	owner  string // this acquisition's id
	holder string // the reentrancy owner, recorded for Holders
	token  uint64
	ttl    time.Duration
	grant  backends.Grant
	// Readers and permits, and writers that Share made readers:
	name   string // the lock's name (slot keys derive from it)
	slot   []byte // the slot row's key; nil for a writer
	kind   string // kindReaders or kindPermits; "" for a writer
	limit  int
	unsure bool // a Share's answer was lost: a writer or a reader (at slot)
	// A reader's or permit's grant whose outcome is unknown: on MySQL it
	// may still wait for the name row on the server, and grant after its
	// client gave up, so its release queues for that row behind it.
	unanswered bool
	// A candidacy in an election (elect.go):
	elect bool
	value string // its first value, written by its acquisition
}

func (h *leaseHold) Token() uint64 { return h.token }

// Follows implements backends.Successor: every grant of a name takes its
// row's counter up by one in the statement that grants it, so the grant
// before this one has the token below. (A retried statement takes it up
// again: then the token below is this acquisition's own, matches no
// release, and the hand-off goes untimed.)
func (h *leaseHold) Follows() (uint64, bool) { return h.token - 1, h.token > 1 }
func (h *leaseHold) Grant() backends.Grant   { return h.grant }

// lockKey is the row key of a name: fixed size whatever the name, and the
// same bytes on both databases, whose collations would otherwise fold case
// or ignore trailing spaces in a text key.
func lockKey(name string) []byte {
	sum := sha256.Sum256([]byte(name))
	return sum[:]
}

func (drv *driver) acquireLease(ctx context.Context, req backends.Request) (backends.Hold, error) {
	if req.Mode == backends.Shared || req.Limit > 1 {
		return drv.acquireShared(ctx, req)
	}
	h := &leaseHold{drv: drv, key: lockKey(req.Name), owner: driverkit.NewID(), holder: req.Owner, ttl: req.TTL,
		elect: req.Elect, value: req.Value}
	switch {
	case drv.queuedPG(req):
		if err := drv.acquireLeasePG(ctx, req, h); err != nil {
			return nil, err
		}
		return h, nil
	case drv.queued(req):
		try := func(ctx context.Context, qc *sql.Conn, _ int64) (bool, error) {
			if qc != nil {
				return drv.tryLease(ctx, qc, h, req.Name, true) // the row goes to the head's connection
			}
			return drv.tryLease(ctx, drv.db, h, req.Name, true)
		}
		left := func(ctx context.Context) (time.Duration, bool, error) { return drv.remaining(ctx, h.key) }
		if err := drv.acquireQueued(ctx, req, try, left, nil); err != nil {
			return nil, err
		}
		return h, nil
	}
	err := drv.acquireLoop(ctx, req, h.key,
		func() (bool, error) { return drv.tryLease(ctx, drv.db, h, req.Name, true) },
		func(w *waiter, attempt int) error { return drv.waitLease(ctx, h.key, w, req.Retry, attempt) })
	if err != nil {
		return nil, err
	}
	return h, nil
}

// acquireLoop runs try until it grants the name, or once when req.Wait is
// false. After the first failed try of a waiting acquisition on
// PostgreSQL it starts listening and tries again at once: a release
// between the failed try and the LISTEN would otherwise go unseen. After
// that, wait paces the tries (a wait that returns at once is a retry).
func (drv *driver) acquireLoop(ctx context.Context, req backends.Request, key []byte,
	try func() (bool, error), wait func(w *waiter, attempt int) error) error {
	var w *waiter
	defer func() {
		if w != nil {
			w.stop()
		}
	}()
	for attempt := 0; ; attempt++ {
		ok, err := try()
		switch {
		case err != nil:
			return err
		case ok:
			return nil
		case !req.Wait:
			return backends.ErrNotAcquired
		}
		if w == nil && drv.notify != nil {
			w = drv.notify.watch(ctx, key)
			continue
		}
		if err := wait(w, attempt); err != nil {
			return err
		}
	}
}

// tryLease runs the acquire statement once, on q (the pool, or a queue's
// head connection: a free row goes only to the connection that heads the
// name's queue, if anyone is queued). The statement runs detached from
// ctx (bounded by the request timeout) so that its outcome is known: a
// grant that arrives after the caller gave up is released at once, and a
// statement whose outcome stays unknown is undone in the background.
// Refused, it checks the name's holders for another limit (a second round
// trip) if check is set; PostgreSQL's queue checks it itself.
func (drv *driver) tryLease(ctx context.Context, q querier, h *leaseHold, name string, check bool) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	sent := time.Now()
	dctx, cancel := drv.bound(context.WithoutCancel(ctx))
	defer cancel()
	args := []any{h.key, name, h.owner, drv.host, drv.pid, h.ttl.Microseconds(), holderArg(h.holder)}
	pool := q == querier(drv.db)
	stmt := drv.st.get("lease_acquire")
	switch {
	case h.elect:
		// A candidacy: the same upsert, which also writes its value.
		stmt, args = drv.st.get("elect_acquire"), append(args, drv.electArgs(h.owner, h.value)...)
	default:
		args = append(args, drv.queueKey(name)) // the queue to respect
	}
	var (
		token uint64
		ok    bool
	)
	if pool {
		release, err := drv.acquiring(dctx)
		if err != nil {
			return false, drv.d.classify(dctx, "sql acquire", err)
		}
		defer release()
		if !h.elect {
			q = drv.preparedOr(dctx, q, "lease_acquire")
		}
	}
	err := drv.retrying(func() error {
		var err error
		token, ok, err = upsertOn(dctx, drv.d, q, stmt, args...)
		return err
	})
	if err != nil {
		err = drv.d.classify(dctx, "sql acquire", err)
		if errors.Is(err, backends.ErrUnavailable) {
			drv.releaseLater(h) // the grant may have been applied
		}
		return false, err
	}
	if !ok {
		// Held: by a writer, by readers, or by a semaphore's permits,
		// which is another limit.
		if !check {
			return false, nil
		}
		return false, drv.writerMismatch(dctx, h.key, name)
	}
	h.token, h.grant = token, backends.Grant{Sent: sent, TTL: h.ttl}
	if err := ctx.Err(); err != nil {
		drv.janitor.Settle(func(ctx context.Context) error { return h.Release(ctx) })
		return false, err
	}
	return true, nil
}

// querier is a pool or one pinned connection.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// upsertOn runs a granting upsert on q and reports the token it granted,
// if any. PostgreSQL returns it as a row (none: not granted). MySQL
// reports 1 affected row for an insert (token 1), 2 for an update (the
// token set with LAST_INSERT_ID) and 0 when nothing changed.
func upsertOn(ctx context.Context, d *dialect, q querier, stmt string, args ...any) (uint64, bool, error) {
	if d.returning {
		var token int64
		err := queryRow(ctx, d, q, stmt, args, &token)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, false, nil
		}
		return uint64(token), err == nil, err
	}
	res, err := q.ExecContext(ctx, stmt, args...)
	if err != nil {
		return 0, false, err
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return 0, false, err
	}
	if n == 1 {
		return 1, true, nil
	}
	id, err := res.LastInsertId()
	return uint64(id), err == nil, err
}

// releaseLater releases h in the background, for an acquire statement
// whose outcome is unknown. Releasing is keyed by h's owner id, so it
// frees nothing but what that statement may have granted.
func (drv *driver) releaseLater(h *leaseHold) {
	drv.janitor.Go(func(ctx context.Context) error { return h.Release(ctx) })
}

// waitLease waits until the name may be free: a release notice (PostgreSQL),
// the holder's lease running out (a holder that died never releases), or
// the next poll (MySQL, or PostgreSQL while its listener is reconnecting),
// whichever comes first.
func (drv *driver) waitLease(ctx context.Context, key []byte, w *waiter, retry backends.Retry, attempt int) error {
	left, held, err := drv.remaining(ctx, key)
	if err != nil || !held {
		return err // an error, or free or expired meanwhile: try now
	}
	// The lease ends then by the database's clock (waitSlot looks a
	// little after).
	return drv.waitSlot(ctx, w, nil, retry, attempt, left)
}

// sleep waits for d, a wake-up on wake (nil: none) or ctx, whichever comes
// first, and returns ctx's error in the last case.
func sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) error {
	return sleepOr(ctx, d, wake, nil)
}

// sleepOr is sleep that also ends when also closes or sends.
func sleepOr(ctx context.Context, d time.Duration, wake, also <-chan struct{}) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-wake:
	case <-also:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// maxLeaseWait bounds a wait for a lease to run out, in case the clock of
// the database jumps.
const maxLeaseWait = time.Minute

// remaining reads how long the holder's lease has left, and whether the
// name is held at all. On PostgreSQL it also tells the holder's release
// that someone waits, so that it sends a NOTIFY.
func (drv *driver) remaining(ctx context.Context, key []byte) (left time.Duration, held bool, err error) {
	qctx, cancel := drv.bound(ctx)
	defer cancel()
	release, err := drv.acquiring(qctx)
	if err != nil {
		return 0, false, drv.d.classify(qctx, "sql wait", err)
	}
	defer release()
	var us int64
	err = queryRow(qctx, drv.d, drv.db, drv.st.get("lease_wait"), []any{key}, &us)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, drv.d.classify(qctx, "sql wait", err)
	}
	if us < 0 {
		return 0, true, fmt.Errorf("%w: this name is held in advisory mode on table %s, and one table serves one mode",
			backends.ErrInvalidOption, drv.cfg.quotedTable())
	}
	return time.Duration(us) * time.Microsecond, true, nil
}

// Renew extends the row's lease, on the database's clock, if it still
// names this acquisition and has not expired.
func (h *leaseHold) Renew(ctx context.Context) (backends.Grant, error) {
	switch {
	case h.unsure:
		return h.Share(ctx) // finish it, or find that it was done
	case h.slot != nil:
		r := h.drv.renewSlots(ctx, []*leaseHold{h})
		return r[0].Grant, r[0].Err
	}
	r := h.drv.renewLease(ctx, []*leaseHold{h})
	return r[0].Grant, r[0].Err
}

// Release frees the row, if it still names this acquisition and has not
// expired, and wakes the name's waiters.
func (h *leaseHold) Release(ctx context.Context) error {
	drv := h.drv
	switch {
	case h.unsure && h.slot != nil:
		// A Share's answer was lost: the hold is one of its two rows.
		if err := h.releaseName(ctx); !errors.Is(err, backends.ErrNotHeld) {
			return err
		}
		return drv.releaseSlot(ctx, h)
	case h.slot != nil:
		return drv.releaseSlot(ctx, h)
	}
	return h.releaseName(ctx)
}

// releaseName frees a writer's name row.
func (h *leaseHold) releaseName(ctx context.Context) error {
	drv := h.drv
	qctx, cancel := drv.bound(ctx)
	defer cancel()
	args := []any{h.key, h.owner}
	stmt := drv.st.get("lease_release")
	if h.elect {
		stmt = drv.st.get("elect_release") // also removes the value, and always notifies
	}
	var n int64
	err := drv.retrying(func() error {
		var err error
		if drv.notify == nil {
			var q querier = drv.db
			if !h.elect {
				q = drv.preparedOr(qctx, q, "lease_release")
			}
			var res sql.Result
			if res, err = q.ExecContext(qctx, stmt, args...); err == nil {
				n, err = res.RowsAffected()
			}
			return err
		}
		var woken int64
		return queryRow(qctx, drv.d, drv.db, stmt, append(args, drv.channel), &n, &woken)
	})
	if err != nil {
		return drv.d.classify(qctx, "sql release", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: the row no longer names this holder, or its lease ran out", backends.ErrNotHeld)
	}
	return nil
}

// RenewBatch renews the holds due together with one UPDATE per TTL (and
// per 500 holds). If fewer rows changed than were asked for, each hold is
// renewed on its own to find out which are gone.
func (drv *driver) RenewBatch(ctx context.Context, holds []backends.Hold) []backends.RenewResult {
	if drv.adv != nil {
		return drv.adv.renewBatch(ctx, holds)
	}
	out := make([]backends.RenewResult, len(holds))
	// Writers, readers and permits are renewed by statements of their
	// own: a batch of each per TTL.
	type batch struct {
		ttl   time.Duration
		slots bool
	}
	byTTL := map[batch][]int{}
	for i, bh := range holds {
		h := bh.(*leaseHold)
		if h.unsure {
			out[i].Grant, out[i].Err = h.Renew(ctx)
			continue
		}
		b := batch{h.ttl, h.slot != nil}
		byTTL[b] = append(byTTL[b], i)
	}
	for b, idx := range byTTL {
		for len(idx) > 0 {
			n := min(len(idx), maxBatch)
			part := make([]*leaseHold, n)
			for j, i := range idx[:n] {
				part[j] = holds[i].(*leaseHold)
			}
			renew := drv.renewLease
			if b.slots {
				renew = drv.renewSlots
			}
			for j, r := range renew(ctx, part) {
				out[idx[j]] = r
			}
			idx = idx[n:]
		}
	}
	return out
}

// maxBatch bounds the holds renewed by one statement.
const maxBatch = 500

// renewLease renews holds that share one TTL.
func (drv *driver) renewLease(ctx context.Context, holds []*leaseHold) []backends.RenewResult {
	out := make([]backends.RenewResult, len(holds))
	n := len(holds)
	keys, owners := make([][]byte, n), make([]string, n)
	for i, h := range holds {
		keys[i], owners[i] = h.key, h.owner
	}
	stmt, args := drv.d.inArgs(drv.st.get("lease_renew"), []any{holds[0].ttl.Microseconds()},
		inList{"keys", keys}, inList{"owners", owners})
	qctx, cancel := drv.bound(ctx)
	defer cancel()
	sent := time.Now()
	var changed int64
	err := drv.retrying(func() error {
		res, err := drv.renewals().ExecContext(qctx, stmt, args...)
		if err == nil {
			changed, err = res.RowsAffected()
		}
		return err
	})
	switch {
	case err != nil:
		err = drv.d.classify(qctx, "sql renew", err)
		for i := range out {
			out[i].Err = err
		}
	case changed == int64(n):
		for i, h := range holds {
			out[i].Grant = backends.Grant{Sent: sent, TTL: h.ttl}
		}
	case n == 1:
		out[0].Err = fmt.Errorf("%w: the row no longer names this holder, or its lease ran out", backends.ErrNotHeld)
	default:
		for i, h := range holds {
			out[i] = drv.renewLease(ctx, []*leaseHold{h})[0]
		}
	}
	return out
}

// renewals is where holds are renewed: their own connection, if they
// have one (connect) and it is open, else the pool. A renewal never dials
// it: a dial (a TLS handshake on a loaded machine) could take what is
// left of a short lease. It is opened at Open (warmRenewals), and again
// in the background if it was lost, while renewals use the pool.
func (drv *driver) renewals() *sql.DB {
	if drv.renewDB == nil {
		return drv.db
	}
	if drv.renewDB.Stats().OpenConnections == 0 {
		drv.warmRenewals()
		return drv.db
	}
	return drv.renewDB
}

// warmRenewals opens the renewals' own connection in the background, once
// at a time, retried by the janitor until it is open or the Locker closes.
func (drv *driver) warmRenewals() {
	if drv.renewDB == nil || !drv.warming.CompareAndSwap(false, true) {
		return
	}
	if !drv.janitor.Go(func(ctx context.Context) error {
		err := drv.renewDB.PingContext(ctx)
		if err == nil {
			drv.warming.Store(false)
		}
		return err
	}) {
		drv.warming.Store(false)
	}
}

// acquiring takes one of the pool's connections that acquisitions' tries
// and waits may use at once: all but one (of a pool of two or more), which
// holders' releases and renewals keep. Under load a release would
// otherwise wait for a connection behind the tries of the very waiters it
// would let in, and every hold would last that much longer: with 16
// waiting goroutines to a Locker of four connections, a fifth of the
// releases took longer than the request bound (TestStress). The function
// it returns gives the connection back.
func (drv *driver) acquiring(ctx context.Context) (func(), error) {
	select {
	case drv.tries <- struct{}{}:
		return func() { <-drv.tries }, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}
