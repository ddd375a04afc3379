package mysqlpg_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/mysqlpg"
	"github.com/padlock-go/padlock/padlocktest"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/padlock-go/padlock/mysqlpg"
)

// eachAdvisory runs f in advisory mode on both databases, with every lock
// of a Locker on one holding session (pool_max_conns=1).
func eachAdvisory(t *testing.T, f func(t *testing.T, h *harness)) {
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) {
			h := newHarness(t, srv, mysqlpg.ModeAdvisory)
			defer h.Close()
			h.extra = url.Values{"pool_max_conns": {"1"}}
			f(t, h)
		})
	}
}

// waitedFor reports whether a PostgreSQL waiter has said, in name's row,
// that it waits for a NOTIFY.
func (h *harness) waitedFor(ctx context.Context, name string) bool {
	var yes bool
	err := h.admin.QueryRowContext(ctx, `SELECT coalesce(waiting_until > now(), false) FROM `+h.quoted()+` WHERE name = $1`, name).Scan(&yes)
	return err == nil && yes
}

// conformanceState checks the server's lock state.
func conformanceState(t *testing.T, h *harness, want []string) {
	t.Helper()
	got, err := h.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("server state %q, want %q", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("server state %q, want %q", got, want)
		}
	}
}

// Every fault the suite knows: a harness that stopped implementing one
// fails to compile here, and the suite fails a subtest whose fault is
// missing and not declared.
var (
	_ conformance.Cutter       = (*harness)(nil)
	_ conformance.Killer       = (*harness)(nil)
	_ conformance.Restarter    = (*harness)(nil)
	_ conformance.Blackholer   = (*harness)(nil)
	_ conformance.Stopper      = (*harness)(nil)
	_ conformance.SilentOpener = (*harness)(nil)
	_ conformance.WaitWitness  = (*harness)(nil)
)

// OpenSilent opens a Locker on a silent endpoint (padlocktest.Silent):
// the database's handshake never comes.
func (h *harness) OpenSilent(ctx context.Context, opts ...padlock.OpenOption) (*padlock.Locker, error) {
	return h.proxies.OpenSilent(ctx, 1, func(addr string) string { return h.url(addr, nil) }, opts...)
}

// server is one database: how to reach it as padlock and as an
// administrator, and how to take it down.
type server struct {
	kind    string // "postgres" or "mysql"
	url     string // padlock's URL for the app user
	addr    string
	adminDB func() (*sql.DB, error)
	// statsDB is the administrator's connection for counting and finding
	// a harness's sessions: on PostgreSQL, to another database than the
	// Lockers', so that the look is not counted with what it counts
	// (pg_stat_database is per database; a session's counts reach it late).
	statsDB func() (*sql.DB, error)
	kill    func() error
	start   func(ctx context.Context) error
}

func servers(t *testing.T) []server {
	t.Helper()
	if startErr != nil {
		t.Skipf("database servers not available: %v", startErr)
	}
	return []server{postgresServer(pg, pg.URL()), mysqlServer(maria, maria.URL())}
}

// postgresServer describes the PostgreSQL server p, whose Lockers
// connect with padlock's URL lockerURL.
func postgresServer(p *padlocktest.Server, lockerURL string) server {
	return server{kind: "postgres", url: lockerURL, addr: p.Addrs(),
		adminDB: func() (*sql.DB, error) { return sql.Open("pgx", p.AdminURL()) },
		statsDB: func() (*sql.DB, error) {
			u, err := url.Parse(p.AdminURL())
			if err != nil {
				return nil, err
			}
			u.Path = "/postgres"
			return sql.Open("pgx", u.String())
		},
		kill: p.Kill, start: p.Start}
}

// mysqlServer describes the MySQL/MariaDB server m, whose Lockers
// connect with padlock's URL lockerURL.
func mysqlServer(m *padlocktest.Server, lockerURL string) server {
	open := func() (*sql.DB, error) { return sql.Open("mysql", m.AdminDSN()) }
	return server{kind: "mysql", url: lockerURL, addr: m.Addrs(), adminDB: open, statsDB: open, kill: m.Kill, start: m.Start}
}

// harness runs one mode on one server, in a table of its own. Every
// Locker reaches the server through a proxy of its own, and names its
// connections (application_name) so that they can be found and killed.
type harness struct {
	t     testing.TB
	srv   server
	mode  string
	table string
	admin *sql.DB
	stats *sql.DB // srv.statsDB's
	// direct connects Lockers to the server without a proxy (no faults:
	// for load tests, where a proxy per Locker would load the machine more
	// than the database does).
	direct bool
	// extra are URL parameters for every Locker.
	extra url.Values
	// ttl is the Lockers' lease; 0 means 2s (TTL).
	ttl time.Duration

	mu      sync.Mutex
	proxies padlocktest.Proxies
	apps    map[*padlock.Locker]string
}

func newHarness(t testing.TB, srv server, mode string) *harness {
	admin, err := srv.adminDB()
	if err != nil {
		t.Fatal(err)
	}
	admin.SetMaxOpenConns(2)
	stats, err := srv.statsDB()
	if err != nil {
		t.Fatal(err)
	}
	stats.SetMaxOpenConns(1)
	return &harness{t: t, srv: srv, mode: mode, table: fmt.Sprintf("padlock_t%d", serial.Add(1)), admin: admin, stats: stats,
		apps: map[*padlock.Locker]string{}}
}

// url returns padlock's URL for this harness through addr, with extra
// query parameters.
func (h *harness) url(addr string, extra url.Values) string {
	u, err := url.Parse(h.srv.url)
	if err != nil {
		h.t.Fatal(err)
	}
	u.Host = addr
	q := u.Query()
	q.Set("table", h.table)
	q.Set("mode", h.mode)
	for _, vs := range []url.Values{h.extra, extra} {
		for k, v := range vs {
			q[k] = v
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func (h *harness) NewLocker(ctx context.Context, opts ...padlock.OpenOption) (*padlock.Locker, error) {
	app := fmt.Sprintf("%s-l%d", h.table, serial.Add(1))
	if h.direct {
		l, err := padlock.Open(ctx, h.url(h.srv.addr, url.Values{"application_name": {app}}), opts...)
		if err == nil {
			h.mu.Lock()
			h.apps[l] = app
			h.mu.Unlock()
		}
		return l, err
	}
	p, err := padlocktest.NewProxy(h.srv.addr)
	if err != nil {
		return nil, err
	}
	l, err := h.proxies.Open(ctx, func(addr string) string { return h.url(addr, url.Values{"application_name": {app}}) },
		[]*padlocktest.Proxy{p}, opts...)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.apps[l] = app
	h.mu.Unlock()
	return l, nil
}

// open opens a Locker with the harness TTL, closed when the test ends.
func (h *harness) open(t testing.TB, opts ...padlock.OpenOption) *padlock.Locker {
	return conformance.NewLocker(context.Background(), t, h, append([]padlock.OpenOption{padlock.WithTTL(h.TTL())}, opts...)...)
}

// TTL is 2s: an advisory session's idle timeout on MySQL counts whole
// seconds.
func (h *harness) TTL() time.Duration {
	if h.ttl > 0 {
		return h.ttl
	}
	return 2 * time.Second
}

// State lists the names held: in lease mode, the rows whose lease has
// not run out (a writer's name row, each reader's and permit's slot row),
// and a name row that readers or permits own (no owner) while none of its
// slot rows is live (a group left behind); in advisory mode, the rows
// whose advisory lock some session holds, read from the server's own lock
// tables.
func (h *harness) State(ctx context.Context) ([]string, error) {
	var q string
	switch {
	case h.srv.kind == "postgres" && h.mode == "lease":
		q = `SELECT name FROM %[1]s t WHERE expires_at > now() AND expires_at < 'infinity'
			AND (owner IS NOT NULL OR NOT EXISTS (SELECT 1 FROM %[1]s s
				WHERE s.parent = t.lock_key AND s.owner IS NOT NULL AND s.expires_at > now()))`
	case h.srv.kind == "postgres":
		// A name row while its lock is held exclusively (a writer); a
		// reader's or permit's row while the session that holds its lock
		// (the name's shared, or the slot's) holds the mark it names.
		q = `SELECT t.name FROM %s t JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
			AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND ((l.classid::bigint << 32) | l.objid::bigint) = t.adv_key
			AND l.mode = CASE WHEN t.parent IS NOT NULL AND t.kind = 'S' THEN 'ShareLock' ELSE 'ExclusiveLock' END
			WHERE t.parent IS NULL OR EXISTS (SELECT 1 FROM pg_locks m WHERE m.locktype = 'advisory' AND m.granted
				AND m.objsubid = 1 AND m.database = l.database AND m.pid = l.pid
				AND ((m.classid::bigint << 32) | m.objid::bigint) = t.adv_mark)`
	case h.mode == "lease":
		q = `SELECT name FROM %[1]s t WHERE expires_at > UTC_TIMESTAMP(6) AND expires_at < '9999-12-31'
			AND (owner IS NOT NULL OR NOT EXISTS (SELECT 1 FROM %[1]s s
				WHERE s.parent = t.lock_key AND s.owner IS NOT NULL AND s.expires_at > UTC_TIMESTAMP(6)))`
	default:
		q = `SELECT name FROM %s WHERE adv_key IS NOT NULL AND IS_USED_LOCK(adv_key) IS NOT NULL
			AND (parent IS NULL OR IS_USED_LOCK(adv_key) = IS_USED_LOCK(adv_mark))`
	}
	rows, err := h.admin.QueryContext(ctx, fmt.Sprintf(q, h.quoted()))
	if err != nil {
		if h.missingTable(err) {
			return nil, nil
		}
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out, rows.Err()
}

func (h *harness) quoted() string {
	if h.srv.kind == "postgres" {
		return `"` + strings.ReplaceAll(h.table, `"`, `""`) + `"`
	}
	return "`" + strings.ReplaceAll(h.table, "`", "``") + "`"
}

// missingTable reports whether err says the table does not exist yet.
func (h *harness) missingTable(err error) bool {
	s := err.Error()
	return strings.Contains(s, "does not exist") || strings.Contains(s, "doesn't exist")
}

// sessions returns the server-side ids of l's connections.
func (h *harness) sessions(ctx context.Context, app string) ([]int64, error) {
	q := `SELECT pid FROM pg_stat_activity WHERE application_name = $1`
	if h.srv.kind == "mysql" {
		q = `SELECT PROCESSLIST_ID FROM performance_schema.session_connect_attrs WHERE ATTR_NAME = 'program_name' AND ATTR_VALUE = ?`
	}
	rows, err := h.stats.QueryContext(ctx, q, app)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// Waiting reports, on PostgreSQL, whether l has a listening connection:
// a Locker starts its listener when it first waits for a held lock (and
// keeps it until Close), so a Locker that had not waited before and now
// listens has begun to wait. On MySQL, whether one of l's connections
// waits in GET_LOCK for a name's queue lock, or, heading a queue in
// advisory mode, for the name's release; a head in lease mode polls, and
// shows it by its back-off.
func (h *harness) Waiting(ctx context.Context, l *padlock.Locker) (bool, error) {
	h.mu.Lock()
	app := h.apps[l]
	h.mu.Unlock()
	switch {
	case h.srv.kind == "postgres":
		return h.listening(ctx, app), nil
	}
	return h.queued(ctx, app, true)
}

// queued reports whether one of app's MySQL connections waits for a
// queue lock (mysqlpg's queue.go names them padlock-q:...), or, with head,
// also whether one heads a queue in advisory mode and waits there for the
// name's release (queue_head_wait.sql).
func (h *harness) queued(ctx context.Context, app string, head bool) (bool, error) {
	var n int
	err := h.admin.QueryRowContext(ctx, `SELECT count(*) FROM performance_schema.session_connect_attrs a
		JOIN information_schema.PROCESSLIST p ON p.ID = a.PROCESSLIST_ID
		WHERE a.ATTR_NAME = 'program_name' AND a.ATTR_VALUE = ?
		AND (p.INFO LIKE '%GET_LOCK(''padlock-q:%' OR ? AND p.INFO LIKE '%IS_FREE_LOCK(%')`, app, head).Scan(&n)
	return n > 0, err
}

// listening reports whether one of app's PostgreSQL connections LISTENs.
func (h *harness) listening(ctx context.Context, app string) bool {
	var n int
	err := h.admin.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN %'`, app).Scan(&n)
	return err == nil && n > 0
}

// terminate ends l's connections on the server side (pg_terminate_backend,
// KILL CONNECTION) and reports how many there were.
func (h *harness) terminate(ctx context.Context, l *padlock.Locker) (int, error) {
	h.mu.Lock()
	app := h.apps[l]
	h.mu.Unlock()
	ids, err := h.sessions(ctx, app)
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		var err error
		if h.srv.kind == "postgres" {
			_, err = h.admin.ExecContext(ctx, `SELECT pg_terminate_backend($1)`, id)
		} else {
			_, err = h.admin.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id))
			if err != nil && strings.Contains(err.Error(), "Unknown thread") {
				err = nil // gone by itself meanwhile
			}
		}
		if err != nil {
			return 0, err
		}
	}
	return len(ids), nil
}

func (h *harness) Cut(_ context.Context, l *padlock.Locker) (func() error, error) {
	return h.proxies.Cut(l), nil
}

// Kill makes l's client vanish: its path to the server is cut for good and
// the server ends its connections, as when the client's machine dies and
// the server notices.
func (h *harness) Kill(ctx context.Context, l *padlock.Locker) error {
	h.proxies.Cut(l)
	_, err := h.terminate(ctx, l)
	return err
}

func (h *harness) Blackhole(ctx context.Context, l *padlock.Locker) (func() error, error) {
	return h.proxies.Blackhole(ctx, l)
}

// RestartServer kills the server and starts it again with its data.
func (h *harness) RestartServer(ctx context.Context) error {
	start, err := h.StopServer(ctx)
	if err != nil {
		return err
	}
	return start(ctx)
}

// StopServer kills the server; starting it again also drops the
// administrator's idle connections, which died with the server (the next
// State would otherwise read "unexpected EOF" from one).
func (h *harness) StopServer(ctx context.Context) (func(context.Context) error, error) {
	if err := h.srv.kill(); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		err := h.srv.start(ctx)
		for _, db := range []*sql.DB{h.admin, h.stats} {
			db.SetMaxIdleConns(0) // closes the idle ones
			db.SetMaxIdleConns(2)
		}
		return err
	}, nil
}

// IgnoreLeaks leaves the harness's own goroutines (server log readers,
// toxiproxy links) out of the suite's leak check.
func (h *harness) IgnoreLeaks() []goleak.Option { return padlocktest.LeakIgnores() }

func (h *harness) Close() error {
	h.proxies.Close()
	return errors.Join(h.admin.Close(), h.stats.Close())
}

// each runs f for both modes on both databases, each in its own harness.
func each(t *testing.T, f func(t *testing.T, h *harness)) {
	for _, srv := range servers(t) {
		for _, mode := range []string{mysqlpg.ModeLease, mysqlpg.ModeAdvisory} {
			t.Run(srv.kind+"/"+mode, func(t *testing.T) {
				h := newHarness(t, srv, mode)
				defer h.Close()
				f(t, h)
			})
		}
	}
}
