package mysqlpg

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// Readers and permits in advisory mode, on PostgreSQL. A reader holds the
// name's advisory lock in shared mode (a writer holds it exclusively, as
// before). A permit holds the lock of one of n slots (its own key, from
// the name and the slot's number), the first free one it finds, so that
// never more than n hold at once; and the name's lock in shared mode, the
// gate that keeps writers and permits apart. Every grant takes the name
// row's counter's next value, as a writer's does, and writes a row of its
// own (a reader's keyed by its acquisition id and dropped by its release;
// a permit's is its slot's, kept) with its token, identity, kind, limit
// and its session's mark (advisory_elect.go): a row counts only while the
// session that holds its lock also holds the mark it names, so a row left
// by a session that died is never taken as a live hold, nor its limit.
//
// The limit rule is checked after the grant, by a statement of its own
// that sees every other grant committed before it: of two grants with
// different limits, the later check sees the earlier one (a permit's
// grant commits before its check; a reader's check runs in its grant's
// transaction after the grant locked the name row, which every grant
// locks to its commit: see readOn), so they are never both kept; each one
// that sees the other undoes its grant and fails, naming both limits. A writer
// checks when refused (a plain lock's statements are unchanged). Waiters
// leave no trace, so a mismatch with a waiter only is not seen.

// sharedAdvisory reports whether this driver grants readers and permits
// in advisory mode: on a table with the columns of readers (migration 3)
// and of the session marks (migration 4).
func (drv *driver) sharedAdvisory() bool {
	return drv.sharedErr == nil && drv.electErr == nil
}

// readerKey is the row key of a reader's hold in advisory mode.
func readerKey(name, id string) []byte {
	sum := sha256.Sum256([]byte(name + "\x00reader\x00" + id))
	return sum[:]
}

// acquireShared takes a reader's or a permit's hold.
func (a *advisory) acquireShared(ctx context.Context, h *advHold, req backends.Request) (backends.Hold, error) {
	if !a.drv.sharedAdvisory() {
		return nil, fmt.Errorf("mysqlpg: %w: readers and permits in advisory mode need a migrated table", backends.ErrUnsupported)
	}
	h.name, h.kind, h.limit = req.Name, localPermit, req.Limit
	if req.Mode == backends.Shared {
		h.kind, h.limit = localReader, 1
		if a.drv.d == postgres {
			h.row = readerKey(req.Name, h.owner) // MySQL's readers hold slots (advisory_gate.go)
		}
	}
	local := hex.EncodeToString(h.key)
	if err := a.takeLocal(ctx, local, req.Name, h.kind, h.limit, req.Wait); err != nil {
		return nil, err
	}
	hold, err := a.acquireServer(ctx, h, req, func() (bool, error) {
		return a.gated(ctx, func(ctx context.Context) (bool, error) { return a.tryShared(ctx, h) })
	})
	if err != nil {
		a.freeLocal(local, h.kind)
		return nil, err
	}
	return hold, nil
}

// tryShared asks the server once, on the name's session, as try does for
// a writer: detached from ctx, and a grant that arrives after the caller
// gave up, or that breaks the limit rule, is undone at once.
func (a *advisory) tryShared(ctx context.Context, h *advHold) (bool, error) {
	var ok, left bool
	err := a.onSession(ctx, h.key, h.ttl, func(dctx context.Context, s *session) error {
		sent := time.Now()
		if err := a.markOn(dctx, s); err != nil {
			return err
		}
		var (
			token  uint64
			got    bool
			limits error // the limit rule's error, where the try checked it
			err    error
		)
		switch {
		case a.drv.d != postgres:
			token, got, limits, err = a.gateOn(dctx, s, h)
		case h.kind == localReader:
			token, got, limits, err = a.readOn(dctx, s, h)
		default:
			token, got, err = a.permitOn(dctx, s, h)
		}
		switch {
		case errors.Is(err, errNoCounter):
			// Granted, and refused by the row: undone.
			if uerr := a.undoShared(dctx, s, h); uerr != nil {
				s.killLocked(uerr)
			}
			return errLeaseRow
		case errors.Is(err, errGateRefused):
			return driverkit.LimitMismatch(h.name, 1, h.limit) // nothing taken
		case errors.Is(err, errGateBusy):
			return err // nothing taken: gated tries again
		case err != nil:
			// Unknown: the statement may have taken a lock that other
			// holds of this session share (readers, permits' gates), so
			// no unlock can undo it alone. End s, which frees them all.
			s.killLocked(err)
			if h.slotLoc != "" {
				a.freeLocal(h.slotLoc, localWriter)
				h.row, h.slotKey, h.slotLoc = nil, nil, ""
			}
			return err
		case !got:
			return nil
		}
		lerr := limits // MySQL's tries and PostgreSQL's readers check in their round trip
		if a.drv.d == postgres && h.kind == localPermit {
			lerr = a.limitsOn(dctx, s, h, h.name, kindOf(h), h.limit)
		}
		if lerr != nil || ctx.Err() != nil {
			if uerr := a.undoShared(dctx, s, h); uerr != nil {
				s.killLocked(uerr)
			}
			left = lerr == nil
			return lerr
		}
		s.holds++
		h.s, h.token, h.grant, ok = s, token, backends.Grant{Sent: sent, TTL: h.ttl}, true
		return nil
	})
	if left {
		return false, ctx.Err() // the caller gave up; the grant was undone
	}
	if errors.Is(err, backends.ErrInvalidOption) || errors.Is(err, errGateBusy) {
		return false, err
	}
	return ok, a.drv.d.classify(ctx, "sql acquire", err)
}

// kindOf is the row kind of a reader's or permit's hold.
func kindOf(h *advHold) string {
	if h.kind == localReader {
		return kindReaders
	}
	return kindPermits
}

// readOn takes the name's lock in shared mode for a reader, on s, and
// applies the limit rule, in one round trip: a pipelined transaction of
// the grant (advisory_read_acquire.sql, which locks the name row as every
// grant does) and then the check (advisory_limits.sql). Under READ
// COMMITTED the check, a statement of its own, sees every grant that
// held the name row before this one (each holds it to its commit), and
// every grant after this one waits for this commit and then sees it: of
// two grants with different limits the later sees the earlier, as when
// the check ran after the commit. A conflict is returned in limits, and
// the caller undoes the grant.
func (a *advisory) readOn(ctx context.Context, s *session, h *advHold) (token uint64, got bool, limits error, err error) {
	drv := a.drv
	var (
		tok  sql.NullInt64
		kind string
		lim  sql.NullInt64
		hit  bool
	)
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	b.Queue(drv.st.get("advisory_read_acquire"), h.advKey, h.key, h.name, h.row, h.owner, drv.host, drv.pid, h.holder, s.mark)
	b.Queue(drv.st.get("advisory_limits"), h.key, h.owner, kindReaders, 1)
	b.Queue("COMMIT")
	err = s.conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("mysqlpg: a PostgreSQL connection of type %T, not pgx's", dc)
		}
		br := sc.Conn().SendBatch(ctx, b)
		err := func() error {
			if _, err := br.Exec(); err != nil {
				return err
			}
			if err := br.QueryRow().Scan(&got, &tok); err != nil {
				return err
			}
			rows, err := br.Query()
			if err != nil {
				return err
			}
			for rows.Next() {
				if err := rows.Scan(&kind, &lim); err != nil {
					rows.Close()
					return err
				}
				hit = true
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			_, err = br.Exec()
			return err
		}()
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		return err
	})
	switch {
	case err != nil:
		return 0, false, nil, err // the caller ends s: the lock may be taken
	case got && !tok.Valid:
		return 0, false, nil, errNoCounter
	case got && hit:
		limits = limitErr(h.name, h, kind, lim)
	}
	return uint64(tok.Int64), got, limits, nil
}

// permitOn takes the gate and the first free slot for a permit, on s, in
// one statement (advisory_permit_try.sql) that asks for every slot this
// Locker's other permits do not hold. Refused at the gate, a writer holds
// the name: the limit rule's error. With no slot free the statement gives
// the gate back.
func (a *advisory) permitOn(ctx context.Context, s *session, h *advHold) (uint64, bool, error) {
	drv := a.drv
	var (
		slots []int
		locks []int64
		rows  [][]byte
		arms  strings.Builder
	)
	for i := range h.limit {
		row := slotKey(h.name, i)
		if a.heldLocal(hex.EncodeToString(row)) {
			continue // a permit of this Locker holds the slot
		}
		slots = append(slots, i)
		locks = append(locks, a.advisoryKey(h.name+"\x00slot\x00"+strconv.Itoa(i)).(int64))
		rows = append(rows, row)
		fmt.Fprintf(&arms, "WHEN pg_try_advisory_lock(($10::bigint[])[%d]) THEN %d ", len(slots), len(slots))
	}
	if len(slots) == 0 {
		return 0, false, nil // every slot is this Locker's: wait for one of them
	}
	stmt := strings.Replace(drv.st.get("advisory_permit_try"), "{{case:slots}}", arms.String(), 1)
	var (
		gate, ungated bool
		pos           int
		tok           sql.NullInt64
	)
	err := queryRow(ctx, drv.d, s.conn, stmt, []any{h.advKey, h.key, h.name, h.owner, drv.host, drv.pid, h.holder, s.mark,
		h.limit, locks, rows}, &gate, &pos, &tok, &ungated)
	switch {
	case err != nil:
		return 0, false, err // the caller ends s: a lock may be taken
	case !gate:
		return 0, false, errGateRefused
	case pos == 0 && !ungated:
		return 0, false, errors.New("mysqlpg: a permit's try kept the gate without a slot")
	case pos == 0:
		return 0, false, nil
	case pos < 0 || pos > len(slots):
		return 0, false, fmt.Errorf("mysqlpg: a permit's try answered candidate %d of %d", pos, len(slots))
	}
	i := slots[pos-1]
	loc := hex.EncodeToString(rows[pos-1])
	h.row, h.slotKey = rows[pos-1], any(locks[pos-1])
	if a.takeLocal(ctx, loc, h.name, localWriter, 1, false) != nil {
		return 0, false, fmt.Errorf("mysqlpg: slot %d, which the server granted, is this Locker's already", i)
	}
	h.slotLoc = loc
	if !tok.Valid {
		return 0, false, errNoCounter
	}
	return uint64(tok.Int64), true, nil
}

// errGateRefused means a permit's gate was refused: a writer holds the
// name (the limit rule's error; nothing was taken).
var errGateRefused = errors.New("a writer holds the name")

// limitsOn applies the limit rule for h (kind and limit: a writer asks as
// a reader, limit 1, since readers never conflict with it by limit), on
// s: a live reader or permit of the name with another kind or limit is
// the rule's error, naming both limits.
func (a *advisory) limitsOn(ctx context.Context, s *session, h *advHold, name, kind string, limit int) error {
	if !a.drv.sharedAdvisory() {
		return nil
	}
	var (
		k   string
		lim sql.NullInt64
	)
	err := queryRow(ctx, a.drv.d, s.conn, a.drv.st.get("advisory_limits"), []any{h.key, h.owner, kind, limit}, &k, &lim)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	return limitErr(name, h, k, lim)
}

// limitErr is the limit rule's error for h, on name, beside a live hold
// of kind and limit lim.
func limitErr(name string, h *advHold, kind string, lim sql.NullInt64) error {
	held := 1
	if kind == kindPermits && lim.Valid {
		held = int(lim.Int64)
	}
	asked := h.limit
	if h.kind != localPermit {
		asked = 1
	}
	return driverkit.LimitMismatch(name, held, asked)
}

// unlockShared releases one shared hold of key on s.
func (a *advisory) unlockShared(ctx context.Context, s *session, key any) error {
	var ok sql.NullBool
	return queryRow(ctx, a.drv.d, s.conn, a.drv.st.get("advisory_unlock_shared"), []any{key}, &ok)
}

// undoShared undoes what a reader's or permit's try may have taken on s:
// a reader's shared lock and row; a permit's slot (and its local claim)
// and gate.
func (a *advisory) undoShared(ctx context.Context, s *session, h *advHold) error {
	if a.drv.d != postgres {
		if h.slotKey == nil {
			return nil
		}
		defer func() {
			a.freeLocal(h.slotLoc, localWriter)
			h.row, h.slotKey, h.slotLoc = nil, nil, ""
		}()
		return a.unlock(ctx, s, h.slotKey)
	}
	if h.kind == localReader {
		var ok sql.NullBool
		var woken int64
		return queryRow(ctx, a.drv.d, s.conn, a.drv.st.get("advisory_read_release"),
			[]any{h.advKey, a.drv.channel, hex.EncodeToString(h.key), h.row, h.owner, h.key}, &ok, &woken)
	}
	defer func() {
		a.freeLocal(h.slotLoc, localWriter)
		h.row, h.slotKey, h.slotLoc = nil, nil, ""
	}()
	return a.releasePermitOn(ctx, s, h, new(sql.NullBool))
}

// releasePermitOn releases a permit's slot and gate on s; ok says
// whether s held the slot.
func (a *advisory) releasePermitOn(ctx context.Context, s *session, h *advHold, ok *sql.NullBool) error {
	var (
		gate  sql.NullBool
		woken int64
	)
	return queryRow(ctx, a.drv.d, s.conn, a.drv.st.get("advisory_permit_release"),
		[]any{h.slotKey, a.drv.channel, hex.EncodeToString(h.key), h.advKey, h.key}, ok, &gate, &woken)
}

// releaseSharedOn is Release's statements for a reader or a permit, on
// s, whose lock the caller holds. ok says whether s held the lock.
func (a *advisory) releaseSharedOn(ctx context.Context, s *session, h *advHold, ok *sql.NullBool) error {
	if a.drv.d != postgres {
		var was sql.NullInt64 // MySQL: the slot's lock; the row stays, not live without it
		err := s.conn.QueryRowContext(ctx, a.drv.st.get("advisory_unlock"), h.slotKey).Scan(&was)
		ok.Valid, ok.Bool = true, was.Valid && was.Int64 == 1
		return err
	}
	if h.kind == localPermit {
		return a.releasePermitOn(ctx, s, h, ok)
	}
	var woken int64
	return queryRow(ctx, a.drv.d, s.conn, a.drv.st.get("advisory_read_release"),
		[]any{h.advKey, a.drv.channel, hex.EncodeToString(h.key), h.row, h.owner, h.key}, ok, &woken)
}

// freeLocal ends h's claims in the local table.
func (h *advHold) freeLocal() {
	h.a.freeLocal(hex.EncodeToString(h.key), h.kind)
	if h.slotLoc != "" {
		h.a.freeLocal(h.slotLoc, localWriter)
	}
}

// Share turns a writer into a reader in place, on its session: its reader
// row (its token unchanged), the name's lock in shared mode, then the
// exclusive hold released, in one statement (a session never conflicts
// with itself). Its outcome is known or the session ends: after an error
// the statement may have taken the shared lock or not, which no unlock
// could tell apart from another reader's on the same session, so the
// session is ended (its locks freed) and Share returns ErrNotHeld. Run on
// a reader it renews.
func (h *advHold) Share(ctx context.Context) (backends.Grant, error) {
	a, drv, s := h.a, h.a.drv, h.s
	if h.kind == localReader {
		return h.Renew(ctx)
	}
	if h.kind != localWriter || h.elect || !drv.sharedAdvisory() {
		return backends.Grant{}, fmt.Errorf("mysqlpg: %w: only a writer becomes a reader", backends.ErrUnsupported)
	}
	sent := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return backends.Grant{}, fmt.Errorf("%w: %w", backends.ErrNotHeld, errSessionDead)
	}
	qctx, cancel := drv.bound(context.WithoutCancel(ctx))
	defer cancel()
	row := readerKey(h.name, h.owner)
	err := a.markOn(qctx, s)
	var got, was bool
	switch {
	case err != nil:
	case drv.d != postgres:
		err = a.shareOnMySQL(qctx, s, h)
		row, got, was = h.row, true, true
	default:
		err = queryRow(qctx, drv.d, s.conn, drv.st.get("advisory_share"),
			[]any{h.advKey, row, h.name, int64(h.token), h.owner, drv.host, drv.pid, h.holder, s.mark,
				h.key, drv.channel, hex.EncodeToString(h.key)}, &got, &was)
	}
	if err == nil && (!got || !was) {
		err = errors.New("the session no longer held the lock exclusively")
	}
	if err != nil {
		s.killLocked(err)
		return backends.Grant{}, fmt.Errorf("%w: %w: %w", backends.ErrNotHeld, errSessionDead,
			drv.d.classify(qctx, "sql share", err))
	}
	h.kind, h.row = localReader, row
	a.shareLocal(hex.EncodeToString(h.key))
	return backends.Grant{Sent: sent, TTL: h.ttl}, nil
}

// shareLocal turns key's local writer into a reader.
func (a *advisory) shareLocal(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e := a.local[key]; e != nil && e.writer {
		e.writer = false
		e.readers++
		close(e.changed)
		e.changed = make(chan struct{})
	}
}
