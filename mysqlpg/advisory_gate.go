package mysqlpg

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/padlock-go/padlock/driverkit"
)

// Readers and permits in MySQL's and MariaDB's advisory mode, which have
// no shared named locks. Each reader or permit holds one slot lock
// (GET_LOCK on a name of its own: slots 0…n-1 for a permit of n, 0…
// mysqlReaders-1 for a reader), the first free one it finds, and a row
// (its slot's) with its token, identity, kind, limit and its connection's
// mark, as on PostgreSQL. What keeps a writer from them is the name row:
// while readers or permits hold the name its adv_key is the group's
// marker, so a writer's upsert (unchanged) refuses it, and the refused
// writer checks for a live reader (it waits) or permit (the limit rule's
// error); finding none, it puts the row back and takes it. A gate lock
// orders the few statements that change the row's state: a reader or
// permit holds it while it puts the row in the group's state, checks that
// no writer holds the name's lock, and takes its slot (one script, one
// round trip: advisory_group_try.sql); a writer that
// finds the row the group's holds it while it looks for live holds and
// puts the row back; a writer's turn into a reader holds it throughout.

// mysqlReaders is the most readers that hold a name at once on MySQL and
// MariaDB: each holds one of this many slot locks, and a reader beyond
// them waits. A reader's try names every slot its Locker does not hold
// in its one statement, so it is kept small.
const mysqlReaders = 32

// gateKeys are a name's gate lock and the marker its row's adv_key holds
// while readers or permits hold the name (a GET_LOCK name nobody takes).
func (a *advisory) gateKeys(name string) (gate, marker any) {
	return a.advisoryKey(name + "\x00gate"), a.advisoryKey(name + "\x00group")
}

// slotLock is the advisory key of a name's slot i: advisoryKey of the
// slot base and i in decimal.
func (a *advisory) slotLock(name string, i int) any {
	return a.advisoryKey(name + "\x00slot\x00" + strconv.Itoa(i))
}

// slotBase is what advisory_group_try.sql derives a MySQL slot's lock
// from (as advisoryKey does): the input of the lock's hash without the
// slot's number.
func (a *advisory) slotBase(name string) string {
	return a.drv.ident + "\x00" + name + "\x00slot\x00"
}

// errGateBusy means another reader, permit or writer was at the name's
// gate, for a few statements: nothing was taken, and the try is run again
// a little later (gateTries, gateBackoff), off the session, so that a
// TryLock or TryRLock that met another at the gate is not refused for it.
var errGateBusy = errors.New("the name's gate is taken")

// gateWait is how long a reader's or permit's try waits for the gate on
// the server: others hold it for one script, about a round trip, and the
// server grants it in turn.
const gateWait = 250 * time.Millisecond

// gateTries and gateBackoff pace the tries that found the gate taken; a
// downgrade, which cannot try again later, waits for the gate on its
// session up to shareGateWait seconds.
const (
	gateTries     = 20
	gateBackoff   = 5 * time.Millisecond
	shareGateWait = 5
)

// gated runs try again while it finds the gate taken, at most gateTries
// times; then it reports the name not granted. Its tries are one attempt
// (driver.attempt): together they wait at most one request bound for a
// server that does not answer.
func (a *advisory) gated(ctx context.Context, try func(ctx context.Context) (bool, error)) (bool, error) {
	ctx = a.drv.attempt(ctx)
	for attempt := 1; ; attempt++ {
		ok, err := try(ctx)
		if !errors.Is(err, errGateBusy) {
			return ok, err
		}
		if attempt == gateTries {
			return false, nil
		}
		if err := sleep(ctx, gateBackoff, nil); err != nil {
			return false, err
		}
	}
}

// takeGate takes gate on s, waiting up to wait seconds: whether it was
// granted. The wait holds s (one statement at a time), never longer.
func (a *advisory) takeGate(ctx context.Context, s *session, gate any, wait int) (bool, error) {
	var in sql.NullInt64
	if err := s.conn.QueryRowContext(ctx, a.drv.st.get("advisory_gate_wait"), gate, wait).Scan(&in); err != nil {
		return false, err
	}
	return in.Valid && in.Int64 == 1, nil
}

// getLock runs GET_LOCK(key, 0) on s: whether it was granted.
func (a *advisory) getLock(ctx context.Context, s *session, key any) (bool, error) {
	var got sql.NullInt64
	if err := s.conn.QueryRowContext(ctx, a.drv.st.get("advisory_try"), key).Scan(&got); err != nil {
		return false, err
	}
	return got.Valid && got.Int64 == 1, nil
}

// gateOn is a MySQL reader's or permit's try on s: through the gate, the
// name row in the group's state, no writer, and the first free slot of
// those this Locker's other holds do not have, in one round trip
// (advisory_group_try.sql) per slotWindow slots asked. A reader that
// finds a writer is refused; a permit gets errGateRefused. A grant beside
// a live hold of another kind or limit is returned with that hold's
// limit rule error, and the caller undoes it. Any other error leaves s
// in an unknown state: the caller ends it.
func (a *advisory) gateOn(ctx context.Context, s *session, h *advHold) (token uint64, got bool, limits error, err error) {
	slots := h.limit
	if h.kind == localReader {
		slots = mysqlReaders
	}
	var window []int
	for i := range slots {
		if !a.heldLocal(hex.EncodeToString(slotKey(h.name, i))) {
			window = append(window, i) // not a slot of this Locker's holds
		}
		if len(window) == slotWindow || (i == slots-1 && len(window) > 0) {
			token, got, limits, full, err := a.gateTry(ctx, s, h, window)
			if err != nil || got || !full {
				return token, got, limits, err
			}
			window = window[:0]
		}
	}
	return 0, false, nil, nil // every slot is taken: wait for one
}

// slotWindow is how many slots one try asks for: each costs the server
// a little to parse, and a name rarely has many readers at once.
const slotWindow = 8

// gateTry is gateOn's one round trip, asking for the slots in window.
// full reports that it was refused only because those slots are taken.
func (a *advisory) gateTry(ctx context.Context, s *session, h *advHold, window []int) (token uint64, got bool, limits error, full bool, err error) {
	drv := a.drv
	gate, marker := a.gateKeys(h.name)
	limit := h.limit
	if h.kind == localReader {
		limit = 1
	}
	args := []any{h.key, h.name, marker, h.advKey, gate, kindOf(h), limit, h.owner, drv.host, drv.pid, h.holder, s.mark,
		gateWait.Seconds(), a.slotBase(h.name)}
	var arms strings.Builder
	for _, i := range window {
		fmt.Fprintf(&arms, "WHEN GET_LOCK(?, 0) = 1 THEN %d ", i+1)
		args = append(args, a.slotLock(h.name, i))
	}
	stmt := strings.Replace(drv.st.get("advisory_group_try"), "{{case:slots}}", arms.String(), 1)
	var (
		in, group, writer bool
		pos               int
		tok               sql.NullInt64
		lock              sql.NullString
		conflict          sql.NullString // a live hold's kind and limit, "P 4"
		gateLeft          sql.NullInt64
	)
	if err := s.conn.QueryRowContext(ctx, stmt, args...).Scan(&in, &group, &writer, &pos, &tok, &lock, &conflict, &gateLeft); err != nil {
		return 0, false, nil, false, err
	}
	switch {
	case pos != 0 && (!in || !group || writer):
		return 0, false, nil, false, fmt.Errorf("mysqlpg: a reader's try took slot %d beside a writer or without the gate", pos-1)
	case !in:
		return 0, false, nil, false, errGateBusy
	case !group:
		return 0, false, nil, false, errNoCounter // a lease-mode row: one table serves one mode
	case writer && h.kind == localPermit:
		return 0, false, nil, false, errGateRefused
	case writer:
		return 0, false, nil, false, nil
	case pos == 0:
		return 0, false, nil, true, nil
	case !slices.Contains(window, pos-1):
		return 0, false, nil, false, fmt.Errorf("mysqlpg: a reader's try answered slot %d, not one it asked for", pos-1)
	}
	i := pos - 1
	h.row, h.slotKey = slotKey(h.name, i), a.slotLock(h.name, i)
	if lock.String != h.slotKey {
		return 0, false, nil, false, fmt.Errorf("mysqlpg: slot %d's lock is %q on the server, %q here", i, lock.String, h.slotKey)
	}
	loc := hex.EncodeToString(h.row)
	if a.takeLocal(ctx, loc, h.name, localWriter, 1, false) != nil {
		return 0, false, nil, false, errors.New("mysqlpg: a slot the server granted is this Locker's already")
	}
	h.slotLoc = loc
	if !tok.Valid {
		return 0, false, nil, false, errors.New("mysqlpg: a reader's grant returned no token")
	}
	if conflict.Valid {
		kind, lim, _ := strings.Cut(conflict.String, " ")
		n, err := strconv.ParseInt(lim, 10, 64)
		limits = limitErr(h.name, h, kind, sql.NullInt64{Int64: n, Valid: err == nil})
	}
	return uint64(tok.Int64), true, limits, false, nil
}

// slotRow writes h's slot row on s with token, kind and limit.
func (a *advisory) slotRow(ctx context.Context, s *session, h *advHold, token uint64, kind string, limit int) error {
	_, err := s.conn.ExecContext(ctx, a.drv.st.get("advisory_slot_row"), h.row, h.name, int64(token), h.owner,
		a.drv.host, a.drv.pid, h.holder, h.slotKey, kind, limit, h.key, s.mark)
	return err
}

// writerGroupOn is a MySQL writer's (or candidacy's) turn when its
// upsert was refused while it holds the name's lock on s: if the row is a group's, through
// the gate it looks for live readers (then it is refused: it waits) and
// permits (the limit rule's error); finding none, it puts the row back in
// the writer's state and runs upsert again. Refused, it has released the
// name's lock; on an error the caller does.
func (a *advisory) writerGroupOn(ctx context.Context, s *session, h *advHold, name string, upsert func() (uint64, bool, error)) (uint64, bool, error) {
	drv := a.drv
	gate, marker := a.gateKeys(name)
	refuse := func() (uint64, bool, error) { return 0, false, a.unlock(ctx, s, h.advKey) }
	in, err := a.getLock(ctx, s, gate)
	if err != nil {
		return 0, false, err
	}
	if !in {
		if _, _, err := refuse(); err != nil {
			return 0, false, err
		}
		return 0, false, errGateBusy
	}
	token, got, err := func() (uint64, bool, error) {
		var writer, group bool
		if err := s.conn.QueryRowContext(ctx, drv.st.get("advisory_group_state"), h.advKey, marker, h.key).Scan(&writer, &group); err != nil {
			return 0, false, err
		}
		if !group {
			// A reader or permit that saw this writer's lock put the row
			// back meanwhile: upsert again. Still refused, it is a
			// lease-mode row, as before.
			token, ok, err := upsert()
			if err == nil && !ok {
				err = errNoCounter
			}
			return token, ok, err
		}
		var (
			kind string
			lim  sql.NullInt64
		)
		err := s.conn.QueryRowContext(ctx, drv.st.get("advisory_limits"), h.key, h.owner, "W", 0).Scan(&kind, &lim)
		switch {
		case err == nil && kind == kindPermits:
			return 0, false, driverkit.LimitMismatch(name, int(lim.Int64), 1)
		case err == nil:
			return refuse() // readers hold the name
		case !errors.Is(err, sql.ErrNoRows):
			return 0, false, err
		}
		if _, err := s.conn.ExecContext(ctx, drv.st.get("advisory_group_leave"), h.advKey, h.key, marker); err != nil {
			return 0, false, err
		}
		token, ok, err := upsert()
		if err == nil && !ok {
			err = errNoCounter
		}
		return token, ok, err
	}()
	if uerr := a.unlock(ctx, s, gate); uerr != nil && err == nil {
		return 0, false, uerr
	}
	return token, got, err
}

// shareOnMySQL is Share's statements on MySQL, on s, whose lock the
// caller holds: through the gate (waiting a little: others hold it for a
// few statements), the row in the group's state, a reader's slot with the
// writer's token, then the name's lock released.
func (a *advisory) shareOnMySQL(ctx context.Context, s *session, h *advHold) error {
	drv := a.drv
	gate, marker := a.gateKeys(h.name)
	in, err := a.takeGate(ctx, s, gate, shareGateWait)
	if err != nil {
		return err
	}
	if !in {
		return errors.New("the name's gate stayed taken")
	}
	if _, err := s.conn.ExecContext(ctx, drv.st.get("advisory_group_enter"), h.key, h.name, marker, h.advKey); err != nil {
		return err
	}
	for i := range mysqlReaders {
		row := slotKey(h.name, i)
		loc := hex.EncodeToString(row)
		if a.takeLocal(ctx, loc, h.name, localWriter, 1, false) != nil {
			continue
		}
		key := a.slotLock(h.name, i)
		ok, err := a.getLock(ctx, s, key)
		if err != nil || !ok {
			a.freeLocal(loc, localWriter)
			if err != nil {
				return err
			}
			continue
		}
		h.row, h.slotKey, h.slotLoc = row, key, loc
		if err := a.slotRow(ctx, s, h, h.token, kindReaders, 1); err != nil {
			return err
		}
		var was sql.NullInt64
		if err := s.conn.QueryRowContext(ctx, drv.st.get("advisory_unlock"), h.advKey).Scan(&was); err != nil {
			return err
		}
		if !was.Valid || was.Int64 != 1 {
			return errors.New("the session no longer held the lock")
		}
		return a.unlock(ctx, s, gate)
	}
	return fmt.Errorf("all %d reader slots are taken", mysqlReaders)
}
