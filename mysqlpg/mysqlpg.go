// Package mysqlpg is padlock's SQL backend, for PostgreSQL and for MySQL
// and MariaDB: one implementation over database/sql, with a dialect for
// each (pgx and go-sql-driver/mysql), in two modes.
//
//	postgres://user:pass@host:5432/db?mode=lease&table=padlock_locks&sslmode=verify-full
//	mysql://user:pass@host:3306/db?mode=advisory&table=padlock_locks&tls=true
//	postgres://padlock@db.example/app?ca=ca.pem&cert=client.pem&key=client-key.pem&password_file=/run/secrets/pg
//
// TLS comes either from the drivers' own parameters (PostgreSQL's sslmode=,
// sslrootcert=…; MySQL's tls=) or from padlock's shared ca=, cert=, key=
// and server_name= (or padlock.WithTLSConfig), which require TLS and
// verify the server; not both at once. password_file= and password_env=
// keep the password out of the URL. A refused password or a missing
// privilege is backends.ErrAccessDenied.
//
// Lease mode (the default) keeps one row per name in a lock table: the
// holder, a fencing counter and an expiry computed and compared on the
// database's clock only. Acquisition is one atomic upsert that inserts the
// row or takes it over when its lease expired, bumping the counter; renewal
// and release touch only the acquisition's own row. PostgreSQL wakes
// waiters with LISTEN/NOTIFY (one listening connection per Locker); MySQL
// has no notification, so its waiting writers queue on the server in
// GET_LOCK, and the queue's head polls (queue.go).
//
// Advisory mode takes the database's own locks (pg_try_advisory_lock,
// GET_LOCK) on a few long-lived holding sessions per Locker, and bumps the
// same per-name counter for the fencing token. The lock belongs to the
// connection: a server that drops the connection frees the lock at once, so
// Capabilities report DoneBeforeRegrant false. Each holding session is
// given an idle timeout of the TTL, so a silent client's locks are freed by
// the server no earlier than its lost-lock notice.
//
// The table is created on first use (CREATE TABLE IF NOT EXISTS), or
// ahead of time with Migrate or `padlock migrate`. See docs/sql.md.
package mysqlpg

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"database/sql"
	sqldriver "database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// URL schemes of this backend.
const (
	// SchemePostgres is PostgreSQL; SchemePostgreSQL is its other name.
	SchemePostgres   = "postgres"
	SchemePostgreSQL = "postgresql"
	// SchemeMySQL is MySQL or MariaDB.
	SchemeMySQL = "mysql"
)

// DefaultTable is the lock table when the URL names none.
const DefaultTable = "padlock_locks"

// DefaultPoolSize is the most connections a Locker opens to the database
// (pool_max_conns), besides PostgreSQL's one listening connection and the
// connections that wait in queues. In advisory mode they are the holding
// sessions; in lease mode, with three or more, one of them is the
// renewals' own.
const DefaultPoolSize = 4

// DefaultDialTimeout bounds Open's wait for the database.
const DefaultDialTimeout = 5 * time.Second

// Modes of this backend.
const (
	// ModeLease keeps each hold as a row with a lease (the default).
	ModeLease = "lease"
	// ModeAdvisory holds the database's advisory locks on held connections.
	ModeAdvisory = "advisory"
)

// params are this backend's own URL parameters, besides ttl and wait.
var params = append([]string{"mode", "table", "pool_max_conns", "dial_timeout", "request_timeout"}, driverkit.SecurityParams...)

// passThrough are the drivers' own connection parameters that padlock
// hands on unchanged (TLS, and PostgreSQL's application name).
var passThrough = map[string][]string{
	SchemePostgres: {"sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword", "sslsni",
		"application_name", "target_session_attrs"},
	SchemeMySQL: {"tls", "application_name"},
}

func init() {
	padlock.Register(SchemePostgres, open)
	padlock.Register(SchemePostgreSQL, open)
	padlock.Register(SchemeMySQL, open)
}

// config is what a URL says.
type config struct {
	dialect    *dialect
	mode       string
	schema     string // "" for the connection's default
	table      string // unquoted
	pool       int
	dial       time.Duration
	reqTimeout time.Duration
	database   string
	addrs      []string          // host:port of each server
	dialFn     backends.DialFunc // the application's WithDialer; nil: a net.Dialer
	u          *url.URL          // with only the drivers' parameters left
	tls        *tls.Config       // from ca=, cert=, key=, server_name= or WithTLSConfig; nil if none
	password   *string           // from password_file= or password_env=; nil if neither
	driverLog  *mysqlLogger      // MySQL's driver log; nil on PostgreSQL
	// connector makes MySQL's connections (set by connect): the kill of
	// a cancelled queue wait dials one of its own with it (killOnCancel).
	connector sqldriver.Connector
}

// quotedTable is the table name as statements use it.
func (c *config) quotedTable() string {
	if c.schema == "" {
		return c.dialect.quote(c.table)
	}
	return c.dialect.quote(c.schema) + "." + c.dialect.quote(c.table)
}

// parentIndex names the index of the table's parent column (migration
// 5): derived from the table's name, since PostgreSQL's index names share
// their schema's namespace, and short whatever that name's length.
func (c *config) parentIndex() string {
	sum := sha256.Sum256([]byte(c.schema + "." + c.table))
	return c.dialect.quote("padlock_parent_" + hex.EncodeToString(sum[:8]))
}

// load reads the dialect's statements for this table.
func (c *config) load() (statements, error) {
	return c.dialect.load(c.quotedTable(), c.parentIndex())
}

// parse reads u into a config, rejecting what it does not know. base is
// the application's tls.Config (WithTLSConfig), or nil.
func parse(u *url.URL, base *tls.Config) (*config, error) {
	scheme := u.Scheme
	if scheme == SchemePostgreSQL {
		scheme = SchemePostgres
	}
	c := &config{dialect: postgres}
	if scheme == SchemeMySQL {
		c.dialect = mysqlDialect
	}
	if err := driverkit.CheckParams(u, append(params, passThrough[scheme]...)...); err != nil {
		return nil, err
	}
	port := "5432"
	if scheme == SchemeMySQL {
		port = "3306"
	}
	var err error
	if c.addrs, err = driverkit.Hosts(u, port); err != nil {
		return nil, err
	}
	if scheme == SchemeMySQL && len(c.addrs) > 1 {
		return nil, fmt.Errorf("%w: mysql:// takes one host", backends.ErrInvalidURL)
	}
	c.database = strings.TrimPrefix(u.Path, "/")
	if c.database == "" || strings.Contains(c.database, "/") {
		return nil, fmt.Errorf("%w: %s:// needs a database name as its path, as in %s://host/db", backends.ErrInvalidURL, u.Scheme, u.Scheme)
	}
	q := u.Query()
	c.mode = ModeLease
	if m, ok := q["mode"]; ok {
		c.mode = m[0]
	}
	if c.mode != ModeLease && c.mode != ModeAdvisory {
		return nil, fmt.Errorf("%w: mode=%q: want %s or %s", backends.ErrInvalidOption, c.mode, ModeLease, ModeAdvisory)
	}
	table := DefaultTable
	if t, ok := q["table"]; ok {
		table = t[0]
	}
	if c.schema, c.table, err = splitTable(table, c.dialect.maxIdent); err != nil {
		return nil, err
	}
	if c.pool, err = driverkit.IntParam(u, "pool_max_conns", 1, DefaultPoolSize); err != nil {
		return nil, err
	}
	if c.dial, c.reqTimeout, err = driverkit.Timeouts(u, DefaultDialTimeout); err != nil {
		return nil, err
	}
	if err := c.security(u, scheme, base); err != nil {
		return nil, err
	}
	rest := *u
	keep := url.Values{}
	for _, k := range passThrough[scheme] {
		if v, ok := q[k]; ok {
			keep[k] = v
		}
	}
	rest.RawQuery = keep.Encode()
	c.u = &rest
	return c, nil
}

// security reads padlock's TLS and password parameters. Its TLS params
// (or base) exclude the driver's own TLS parameters: one source says how to
// reach the server.
func (c *config) security(u *url.URL, scheme string, base *tls.Config) error {
	t, on, err := driverkit.TLSConfig(u, base)
	if err != nil {
		return err
	}
	if on {
		for _, k := range passThrough[scheme] {
			if (strings.HasPrefix(k, "ssl") || k == "tls") && u.Query().Has(k) {
				return fmt.Errorf("%w: %s= with ca=, cert=, key=, server_name= or WithTLSConfig: give TLS one way", backends.ErrInvalidOption, k)
			}
		}
		c.tls = t
	}
	q := u.Query()
	if q.Has("password_file") || q.Has("password_env") {
		pw, err := driverkit.Password(u)
		if err != nil {
			return err
		}
		c.password = &pw
	}
	return nil
}

// splitTable splits "schema.table" or "table" and checks each part: not
// empty, no NUL, no longer than the server allows. Any other character is
// allowed: names are always quoted.
func splitTable(s string, max int) (schema, table string, err error) {
	parts := strings.Split(s, ".")
	if len(parts) > 2 {
		return "", "", fmt.Errorf("%w: table=%q has more than one dot: want table or schema.table", backends.ErrInvalidOption, s)
	}
	for _, p := range parts {
		switch {
		case p == "":
			return "", "", fmt.Errorf("%w: table=%q has an empty part", backends.ErrInvalidOption, s)
		case len(p) > max:
			return "", "", fmt.Errorf("%w: table=%q: %q is longer than %d bytes", backends.ErrInvalidOption, s, p, max)
		case strings.ContainsRune(p, 0):
			return "", "", fmt.Errorf("%w: table=%q contains NUL", backends.ErrInvalidOption, s)
		}
	}
	if len(parts) == 2 {
		return parts[0], parts[1], nil
	}
	return "", parts[0], nil
}

// driver is one Locker's client: a connection pool, and in advisory mode
// its holding sessions.
type driver struct {
	cfg     *config
	d       *dialect
	db      *sql.DB
	st      statements
	host    string
	pid     int
	janitor *driverkit.Janitor // releases of acquisitions whose caller left
	notify  *listener          // PostgreSQL's wake-ups; nil on MySQL
	waits   *sql.DB            // connections waiting in writers' queues (queue.go, queue_pg.go)
	// queueSlots hands the waits' connections (maxQueued) to waiting
	// writers in the order they asked.
	queueSlots *slotLine
	// renewDB is the renewals' own connection, one of the pool's, in
	// lease mode with a pool of three or more (connect); nil otherwise.
	renewDB *sql.DB
	warming atomic.Bool // warmRenewals is opening renewDB
	// tries counts db's connections in use by acquisitions' tries and
	// waits (acquiring): all but one of them, which releases keep (and
	// renewals, where they have no connection of their own).
	tries     chan struct{}
	queuePrep queuePrepared // PostgreSQL's waits connections with the queue's statements
	channel   string        // the NOTIFY channel of this table
	adv       *advisory     // advisory mode's sessions; nil in lease mode
	ident     string        // the table's identity on the server
	// forcedErr says why the table has no forced columns (an older table
	// padlock's user may not alter): forced releases go unrecorded.
	forcedErr error
	// sharedErr says why the table has no columns for readers and
	// permits (an older table padlock's user may not alter): lease mode
	// then offers neither.
	sharedErr error
	// electErr says why the table has no columns of elections (an older
	// table padlock's user may not alter): no Elections then.
	electErr error
	// freed are the names whose group of readers this Locker's own
	// release emptied last (PostgreSQL's lease mode).
	freed freedGroups
	// prep are MySQL's statements run prepared (prepared.go).
	prep preparedSet
}

func open(ctx context.Context, u *url.URL, bcfg backends.Config) (backends.Driver, error) {
	cfg, err := parse(u, bcfg.TLS)
	if err != nil {
		return nil, err
	}
	cfg.dialFn = bcfg.Dial
	db, renew, waits, listenCfg, err := connect(cfg, bcfg.Logger)
	if err != nil {
		return nil, err
	}
	st, err := cfg.load()
	if err != nil {
		db.Close()
		if renew != nil {
			renew.Close()
		}
		if waits != nil {
			waits.Close()
		}
		return nil, err
	}
	host, _ := os.Hostname()
	drv := &driver{cfg: cfg, d: cfg.dialect, db: db, renewDB: renew, waits: waits, queueSlots: newSlotLine(maxQueued),
		tries: make(chan struct{}, max(db.Stats().MaxOpenConnections-1, 1)),
		st:    st, host: host, pid: os.Getpid(),
		janitor: driverkit.NewJanitor()}
	// The dial bound running out means no answer: unavailable, as a
	// refused dial is (ErrNoAnswer tells it from the caller's deadline).
	dctx, cancel := driverkit.WithRequestTimeout(ctx, cfg.dial)
	defer cancel()
	if err := drv.ensureTable(dctx); err != nil {
		drv.Close(context.Background())
		return nil, cfg.driverLog.explain(err)
	}
	drv.warmRenewals()
	drv.forcedErr = drv.ensureForcedColumns(dctx)
	drv.sharedErr = drv.ensureSharedColumns(dctx)
	drv.electErr = drv.ensureElectColumns(dctx)
	if drv.sharedErr == nil {
		if err := drv.ensureParentIndex(dctx); err != nil && bcfg.Logger != nil {
			// Only slower: each advisory reader's and permit's check of
			// the limit rule then reads the whole table.
			bcfg.Logger.Warn("padlock: the lock table has no index on its parent column; run padlock migrate with a user that may alter the table",
				"table", cfg.quotedTable(), "err", err)
		}
	}
	drv.channel = channelName(drv.ident)
	if listenCfg != nil {
		drv.notify = newListener(listenCfg, drv.channel, cfg.dial, bcfg.Logger)
	}
	if cfg.mode == ModeAdvisory {
		drv.adv = newAdvisory(drv)
	}
	return drv, nil
}

// ensureTable creates the lock table unless it exists, and learns its
// identity. It looks first, so that a user who may not run DDL (and made
// the table with Migrate) can still open; two Lockers creating it at once
// is not an error.
func (drv *driver) ensureTable(ctx context.Context) error {
	ident, err := drv.tableIdentity(ctx)
	if err != nil {
		return err
	}
	if ident != "" {
		drv.ident = ident
		return drv.ensureHolderColumn(ctx)
	}
	_, cerr := drv.db.ExecContext(ctx, drv.st.get("schema"))
	if ident, err := drv.tableIdentity(ctx); err == nil && ident != "" {
		drv.ident = ident // made by us, or by another client meanwhile
		return drv.ensureHolderColumn(ctx)
	}
	if cerr == nil {
		cerr = errors.New("created, but not found after")
	}
	return drv.d.classify(ctx, "create lock table "+drv.cfg.quotedTable(), cerr)
}

// ensureHolderColumn adds the holder column (the reentrancy owner, for
// Holders) to a lock table made by a padlock that did not have it.
func (drv *driver) ensureHolderColumn(ctx context.Context) error {
	return drv.migration(ctx, "holder_column", "add_holder", "the holder column")
}

// tableArgs are the arguments that name the table to the statements that
// look it up.
func (drv *driver) tableArgs() []any {
	if drv.d == postgres {
		return []any{drv.cfg.quotedTable()}
	}
	return []any{drv.cfg.schema, drv.cfg.table}
}

// tableIdentity returns the table's database, schema and name as the
// server knows them ("" if there is no such table). Advisory keys and the
// NOTIFY channel derive from it, not from the URL's spelling, so that
// table=t and table=public.t, say, share their locks.
func (drv *driver) tableIdentity(ctx context.Context) (string, error) {
	rows, err := drv.db.QueryContext(ctx, drv.st.get("exists"), drv.tableArgs()...)
	if err != nil {
		return "", drv.d.classify(ctx, "open "+drv.cfg.u.Scheme+"://"+drv.cfg.u.Host, err)
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var db, schema, table string
		if err := rows.Scan(&db, &schema, &table); err != nil {
			return "", err
		}
		id := db + "\x00" + schema + "\x00" + table
		if table == drv.cfg.table {
			return id, nil
		}
		found = append(found, id)
	}
	if err := rows.Err(); err != nil {
		return "", drv.d.classify(ctx, "open "+drv.cfg.u.Scheme+"://"+drv.cfg.u.Host, err)
	}
	if len(found) == 1 {
		return found[0], nil // the server folds the name's case
	}
	return "", nil
}

// Capabilities: one database is linearizable, and its counter is durable
// before the grant is acknowledged (CP; tokens survive a restart). Whether
// they survive a failover depends on the database's replication, which
// padlock neither sets up nor checks: a synchronous standby keeps the
// counter, a promoted asynchronous replica can lose the last grants (see
// docs/sql.md), so FencingSurvivesFailover is false. PostgreSQL pushes
// wake-ups, and its writers wait in a server-side queue in lease mode
// whose head alone is woken (queue_pg.go); MySQL's writers wait in a
// server-side queue whose head alone polls (queue.go), in both modes.
// Neither is FairFIFO: PostgreSQL's advisory mode does not queue, readers,
// permits and candidacies do not queue, and a Locker
// keeps at most maxQueued waiters in queues at once. Lease mode grants readers
// and permits (SharedLocks, Limits) on a table that has their columns
// (migration 3); so does advisory mode, which also needs the session
// marks' column (migration 4): PostgreSQL's readers hold its shared
// advisory locks (advisory_shared.go), MySQL's hold slot locks behind a
// gate (advisory_gate.go). Both modes run elections (Elections) on a
// table that has their columns (migration 4).
func (drv *driver) Capabilities() backends.Capabilities {
	shared := drv.sharedErr == nil && (drv.adv == nil || drv.sharedAdvisory())
	return backends.Capabilities{
		SharedLocks:             shared,
		Limits:                  shared,
		Consistency:             backends.CP,
		MonotonicTokens:         true,
		FencingSurvivesFailover: false,
		PushWakeup:              drv.notify != nil,
		DoneBeforeRegrant:       drv.adv == nil,
		HoldsSurviveRestart:     holdsSurviveRestart(drv.adv == nil),
		Elections:               drv.electErr == nil,
		// MinTTL is zero: a lease row's expiry counts microseconds, and
		// an advisory session's idle timeout, which counts whole seconds
		// on MySQL, is rounded up (a silent holder's lock is then freed
		// a little later than its lease, never sooner).
	}
}

// holdsSurviveRestart: a lease is a committed row, which survives a
// restart; an advisory lock belongs to a connection, which a restart ends.
func holdsSurviveRestart(lease bool) backends.Tristate {
	if lease {
		return backends.Yes
	}
	return backends.No
}

// Acquire takes the lock in the configured mode.
func (drv *driver) Acquire(ctx context.Context, req backends.Request) (backends.Hold, error) {
	if drv.adv != nil {
		return drv.adv.acquire(ctx, req)
	}
	return drv.acquireLease(ctx, req)
}

// Close stops the listener and the holding sessions, and closes the pool.
// The portable layer has released every hold by then.
func (drv *driver) Close(ctx context.Context) error {
	jerr := drv.janitor.Close(ctx)
	var errs []error
	if drv.notify != nil {
		errs = append(errs, drv.notify.close(ctx))
	}
	if drv.adv != nil {
		drv.adv.close()
	}
	drv.prep.close()
	errs = append(errs, drv.db.Close())
	if drv.renewDB != nil {
		errs = append(errs, drv.renewDB.Close())
	}
	if drv.waits != nil {
		errs = append(errs, drv.waits.Close())
	}
	if jerr != nil {
		errs = append(errs, fmt.Errorf("mysqlpg: cleanup still running at close: %w", jerr))
	}
	return errors.Join(errs...)
}

// bound bounds one statement by the request timeout, or by the end of
// the attempt it belongs to (attempt), if that comes first.
func (drv *driver) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if end, ok := ctx.Value(attemptEnd{}).(time.Time); ok {
		return context.WithDeadlineCause(ctx, end, driverkit.ErrNoAnswer)
	}
	return driverkit.WithRequestTimeout(ctx, drv.cfg.reqTimeout)
}

// attemptEnd is the context key of an attempt's end (attempt).
type attemptEnd struct{}

// attempt makes every statement bounded under ctx (bound) share one
// request timeout from now: one try of an acquisition opens a session,
// sets it up, runs its statements (several on MySQL's gate, and again
// while the gate is busy) and may start over on a fresh session; on a
// silent path each of those waited a bound of its own, and one try took
// several bounds. Inside an attempt, it changes nothing.
func (drv *driver) attempt(ctx context.Context) context.Context {
	if _, ok := ctx.Value(attemptEnd{}).(time.Time); ok {
		return ctx
	}
	d := drv.cfg.reqTimeout
	if d <= 0 {
		d = driverkit.DefaultRequestTimeout
	}
	return context.WithValue(ctx, attemptEnd{}, time.Now().Add(d))
}

// retrying runs f, and again (a few times) if the server chose it as a
// deadlock victim: such a statement changed nothing.
func (drv *driver) retrying(f func() error) error {
	var err error
	for range 5 {
		if err = f(); err == nil || !drv.d.retryable(err) {
			return err
		}
	}
	return err
}
