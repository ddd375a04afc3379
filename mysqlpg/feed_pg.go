package mysqlpg

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/padlock-go/padlock/backends"
)

var _ backends.HoldersWatcher = (*driver)(nil)

// Why WatchHolders cannot follow a table: the reasons it says with
// backends.ErrUnsupported.
var (
	errFeedAdvisory = errors.New("mysqlpg: advisory mode's locks are sessions' advisory locks, which change no row when they are released or their session ends: poll Holders")
	errFeedWALLevel = errors.New("mysqlpg: following the lock table needs logical decoding (wal_level=logical)")
	errFeedRole     = errors.New("mysqlpg: following the lock table needs a user that may replicate (ALTER ROLE ... REPLICATION)")
)

// feedStatusEvery is how often a feed tells the server how far it has
// read (its temporary slot keeps the WAL from there until it does), and
// asks it to answer: a feed that heard nothing from the server for two
// of these takes the connection for dead (a silent server or path never
// says so) and connects again.
const feedStatusEvery = 10 * time.Second

// WatchHolders follows the lock table's changes on PostgreSQL in lease
// mode by logical replication: a replication connection of its own
// decodes the table's publication (pgoutput) from a temporary slot, which
// the server drops when the connection ends, and each committed
// transaction that changed a row of a name under prefix (a grant, a
// release, a renewal, a reader's or permit's slot, a waiter saying that
// it waits) signals once. Nothing is added to the locks' own statements:
// a NOTIFY on every grant and release would make each of those commits
// wait for the server-wide lock that orders notifying commits. A lease
// that expires changes no row, so nothing signals it (the reader of
// Holders sees it at its next look, or at the lease's end, which Holder
// gives). It needs wal_level=logical on the server and a user that may
// replicate; the first call makes the table's publication if it is
// missing (which needs the table's owner; Migrate makes it too). Without
// them, or in advisory mode, or on MySQL, it says ErrUnsupported and why.
// While the connection is down nothing is signalled; once it is back the
// watch signals, since a change may have gone unseen meanwhile.
func (drv *driver) WatchHolders(ctx context.Context, prefix string) (<-chan struct{}, error) {
	switch {
	case drv.notify == nil:
		return nil, fmt.Errorf("%w: %w", backends.ErrUnsupported, errNoPush)
	case drv.adv != nil:
		return nil, fmt.Errorf("%w: %w", backends.ErrUnsupported, errFeedAdvisory)
	}
	if err := drv.feedReady(ctx); err != nil {
		return nil, err
	}
	f := &feed{drv: drv, prefix: prefix, c: make(chan struct{}, 1),
		publication: drv.publication(), cfg: drv.notify.cfg.Config.Copy()}
	f.cfg.RuntimeParams["replication"] = "database"
	conn, err := f.connect(ctx)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, drv.d.classify(ctx, "watch holders", err)
	}
	l := drv.notify
	l.wg.Go(func() { f.run(ctx, conn) })
	return f.c, nil
}

// publication is the lock table's publication: one per table, named from
// its identity as the NOTIFY channel is.
func (drv *driver) publication() string {
	sum := sha256.Sum256([]byte(drv.ident))
	return "padlock_feed_" + hex.EncodeToString(sum[:12])
}

// feedReady checks that the server decodes logically and the user may
// replicate, and makes the table's publication if it is missing.
func (drv *driver) feedReady(ctx context.Context) error {
	level, replicate, published, err := drv.feedState(ctx)
	switch {
	case err != nil:
		return drv.d.classify(ctx, "watch holders", err)
	case level != "logical":
		return fmt.Errorf("%w: %w (the server's is %s)", backends.ErrUnsupported, errFeedWALLevel, level)
	case !replicate:
		return fmt.Errorf("%w: %w", backends.ErrUnsupported, errFeedRole)
	case published:
		return nil
	}
	return drv.publish(ctx)
}

// feedState reads the server's wal_level, whether the user may replicate,
// and whether the table's publication exists (feed_check.sql).
func (drv *driver) feedState(ctx context.Context) (level string, replicate, published bool, err error) {
	qctx, cancel := drv.bound(ctx)
	defer cancel()
	err = drv.db.QueryRowContext(qctx, drv.st.get("feed_check"), drv.publication(), drv.cfg.quotedTable()).Scan(&level, &replicate, &published)
	return level, replicate, published, err
}

// ensurePublication makes the table's publication unless it exists
// (Migrate's sixth step).
func (drv *driver) ensurePublication(ctx context.Context) error {
	_, _, published, err := drv.feedState(ctx)
	if err != nil || published {
		return drv.d.classify(ctx, "migrate", err)
	}
	return drv.publish(ctx)
}

// publish makes the table's publication. Another client making it at the
// same moment is no error; a user who may not is ErrUnsupported.
func (drv *driver) publish(ctx context.Context) error {
	qctx, cancel := drv.bound(ctx)
	defer cancel()
	stmt := strings.ReplaceAll(drv.st.get("feed_publish"), "{{publication}}", pgx.Identifier{drv.publication()}.Sanitize())
	_, err := drv.db.ExecContext(qctx, stmt)
	var pe *pgconn.PgError
	switch {
	case err == nil, errors.As(err, &pe) && pe.Code == "42710": // duplicate_object
		return nil
	case errors.As(err, &pe) && pe.Code == "42501": // insufficient_privilege
		return fmt.Errorf("%w: the lock table has no publication for WatchHolders, and this user may not make one (run padlock migrate as the table's owner): %v",
			backends.ErrUnsupported, err)
	}
	return drv.d.classify(ctx, "watch holders: create publication", err)
}

// feed is one WatchHolders: its replication connection, run by run.
type feed struct {
	drv         *driver
	prefix      string
	publication string
	cfg         *pgconn.Config // the listener's, as a replication connection
	c           chan struct{}
}

// connect opens a replication connection, makes a temporary slot and
// starts decoding the publication from the slot's start, within the dial
// bound.
func (f *feed) connect(ctx context.Context) (*pgconn.PgConn, error) {
	ctx, cancel := context.WithTimeout(ctx, f.drv.cfg.dial)
	defer cancel()
	conn, err := pgconn.ConnectConfig(ctx, f.cfg)
	if err != nil {
		return nil, err
	}
	slot := "padlock_watch_" + strings.ToLower(rand.Text())
	res, err := pglogrepl.CreateReplicationSlot(ctx, conn, slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Temporary: true, Mode: pglogrepl.LogicalReplication, SnapshotAction: "NOEXPORT_SNAPSHOT"})
	var start pglogrepl.LSN
	if err == nil {
		start, err = pglogrepl.ParseLSN(res.ConsistentPoint)
	}
	if err == nil {
		err = pglogrepl.StartReplication(ctx, conn, slot, start, pglogrepl.StartReplicationOptions{Mode: pglogrepl.LogicalReplication,
			PluginArgs: []string{"proto_version '1'", "publication_names '" + f.publication + "'"}})
	}
	if err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// run follows conn, and connects again when it fails, until ctx ends or
// the Locker closes; then it closes the channel.
func (f *feed) run(ctx context.Context, conn *pgconn.PgConn) {
	l := f.drv.notify
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(l.ctx, cancel)
	defer stop()
	defer close(f.c)
	for attempt := 0; ; attempt++ {
		if conn != nil {
			attempt = 0
			f.signal() // the watch is up, or up again: look
			err := f.follow(ctx, conn)
			cctx, cancelClose := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			conn.Close(cctx)
			cancelClose()
			if ctx.Err() != nil {
				return
			}
			l.log.Warn("padlock: postgres WatchHolders lost its replication connection; reconnecting", "err", err)
		}
		t := time.NewTimer(reconnectBackoff.NextBackoff(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		var err error
		if conn, err = f.connect(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("padlock: postgres WatchHolders cannot follow the lock table; trying again", "err", err)
		}
	}
}

// follow reads the decoded changes from conn until it fails or ctx ends,
// signalling each committed transaction that changed a name under the
// prefix, and tells the server how far it read every feedStatusEvery and
// whenever it asks.
func (f *feed) follow(ctx context.Context, conn *pgconn.PgConn) error {
	var read pglogrepl.LSN
	nameCol := map[uint32]int{} // the name column's index, by relation
	changed := false            // the transaction under way changed a name under the prefix
	status := time.Now().Add(feedStatusEvery)
	heard := time.Now() // the last message from the server
	for {
		if !time.Now().Before(status) {
			if time.Since(heard) > 2*feedStatusEvery {
				return fmt.Errorf("mysqlpg: no message from the server for %v", time.Since(heard).Round(time.Second))
			}
			if err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: read, ReplyRequested: true}); err != nil {
				return err
			}
			status = time.Now().Add(feedStatusEvery)
		}
		rctx, cancel := context.WithDeadline(ctx, status)
		msg, err := conn.ReceiveMessage(rctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && pgconn.Timeout(err):
			continue // time to say how far it read
		case err != nil:
			return err
		}
		heard = time.Now()
		var data []byte
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			return pgconn.ErrorResponseToPgError(m)
		case *pgproto3.CopyData:
			data = m.Data
		default:
			continue
		}
		if len(data) == 0 {
			continue
		}
		switch data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
			if err != nil {
				return err
			}
			read = max(read, ka.ServerWALEnd)
			if ka.ReplyRequested {
				status = time.Time{}
			}
		case pglogrepl.XLogDataByteID:
			x, err := pglogrepl.ParseXLogData(data[1:])
			if err != nil {
				return err
			}
			read = max(read, x.WALStart+pglogrepl.LSN(len(x.WALData)))
			m, err := pglogrepl.Parse(x.WALData)
			if err != nil {
				return err
			}
			switch m := m.(type) {
			case *pglogrepl.RelationMessage:
				nameCol[m.RelationID] = -1
				for i, c := range m.Columns {
					if c.Name == "name" {
						nameCol[m.RelationID] = i
					}
				}
			case *pglogrepl.InsertMessage:
				changed = changed || f.under(m.Tuple, nameCol[m.RelationID])
			case *pglogrepl.UpdateMessage:
				changed = changed || f.under(m.NewTuple, nameCol[m.RelationID])
			case *pglogrepl.DeleteMessage:
				changed = true // a delete carries the key only
			case *pglogrepl.CommitMessage:
				if changed {
					f.signal()
				}
				changed = false
			}
		}
	}
}

// under reports whether a changed row's name is under the feed's prefix;
// a row whose name the message does not carry counts as under it.
func (f *feed) under(t *pglogrepl.TupleData, col int) bool {
	if f.prefix == "" || t == nil || col < 0 || col >= len(t.Columns) || t.Columns[col].DataType != pglogrepl.TupleDataTypeText {
		return true
	}
	return strings.HasPrefix(string(t.Columns[col].Data), f.prefix)
}

// signal sends one signal, unless one is pending.
func (f *feed) signal() {
	select {
	case f.c <- struct{}{}:
	default:
	}
}
