package mysqlpg

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
)

// A candidacy in advisory mode (elect.go) is taken on a session that holds
// a mark: an advisory lock of its own on a random key, taken by the
// session's first candidacy and held until the session ends. The row names
// the mark with the value, and Leader reports the row only while one
// session holds both the name's lock and that mark. A row whose session
// died names a mark nobody holds, and the next holder's lock is taken
// before its row is written (one statement on PostgreSQL, two on MySQL),
// so while the row is not yet rewritten it names a mark the new holder
// does not hold: Leader never reports a term that is over. A backend pid
// or CONNECTION_ID would not do: both are reused after a restart.

// errMarkTaken means a session's random mark was held already: never, in
// practice (64 bits on PostgreSQL, 160 on MySQL).
var errMarkTaken = errors.New("mysqlpg: a session mark's random key is taken")

// markOn takes a mark for s, whose lock the caller holds, if it has none.
func (a *advisory) markOn(ctx context.Context, s *session) error {
	if s.mark != nil {
		return nil
	}
	var b [20]byte
	rand.Read(b[:])
	var (
		mark any = "padlock:m:" + hex.EncodeToString(b[:])
		got  sql.NullBool
	)
	if a.drv.d == postgres {
		mark = int64(binary.BigEndian.Uint64(b[:8]))
	}
	if err := s.conn.QueryRowContext(ctx, a.drv.st.get("advisory_mark"), mark).Scan(&got); err != nil {
		return err
	}
	if !got.Bool {
		return errMarkTaken
	}
	s.mark = mark
	return nil
}

// releaseElectOn is Release's statements for a candidacy, on s, whose lock
// the caller holds: remove the value from the row and unlock (and on
// PostgreSQL tell Observe, in the same statement). ok says whether s held
// the lock.
func (a *advisory) releaseElectOn(ctx context.Context, s *session, h *advHold, ok *sql.NullBool) error {
	drv := a.drv
	if drv.notify != nil {
		var woken int64
		return s.conn.QueryRowContext(ctx, drv.st.get("advisory_elect_release"),
			h.advKey, drv.channel, hex.EncodeToString(h.key), h.key, h.owner).Scan(ok, &woken)
	}
	if _, err := s.conn.ExecContext(ctx, drv.st.get("advisory_elect_clear"), h.key, h.owner); err != nil {
		return err
	}
	return s.conn.QueryRowContext(ctx, drv.st.get("advisory_unlock"), h.advKey).Scan(ok)
}
