package mysqlpg

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/padlock-go/padlock/backends"
)

// connect builds the connection pool for cfg; in lease mode with a pool
// of three or more, the renewals' own connection, one of the pool's
// (renew; nil otherwise, and renewals share db); for PostgreSQL the
// configuration of the listening connection; and the pool of connections
// that wait in writers' queues (queue.go, queue_pg.go). It dials nothing
// yet.
//
// A renewal keeps holds that are already granted: it must not wait for a
// connection behind new work. database/sql hands a freed connection to a
// random waiter, so under load a renewal that shared the pool with
// releases and tries could lose the draw for a whole lease (a rehearsal's
// TestStress lost three holds so, each with no renewal acknowledged in
// its minute).
func connect(cfg *config, log *slog.Logger) (db, renew, waits *sql.DB, listen *pgx.ConnConfig, err error) {
	split := cfg.mode == ModeLease && cfg.pool >= 3
	if cfg.dialect == postgres {
		u := *cfg.u
		u.Scheme = SchemePostgres
		pc, err := pgx.ParseConfig(u.String())
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("%w: %s", backends.ErrInvalidURL, redact(err, &u))
		}
		pc.ConnectTimeout = cfg.dial
		if cfg.dialFn != nil {
			pc.DialFunc = pgconn.DialFunc(cfg.dialFn)
			// The application's dial function gets the host as written (a
			// proxy or tunnel resolves it), not addresses pgx looked up.
			pc.LookupFunc = func(ctx context.Context, host string) ([]string, error) { return []string{host}, nil }
		}
		if cfg.tls != nil {
			requireTLS(pc, cfg.tls)
		}
		if cfg.password != nil {
			pc.Password = *cfg.password
		}
		listen = pc.Copy()
		db = stdlib.OpenDB(*pc)
		waits = stdlib.OpenDB(*pc.Copy())
		if split {
			renew = stdlib.OpenDB(*pc.Copy())
		}
	} else {
		mc, err := mysqlConfig(cfg, log)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		conn, err := mysql.NewConnector(mc)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("%w: mysql:// (tls=%q): %v", backends.ErrInvalidOption, mc.TLSConfig, err)
		}
		cfg.connector = conn
		db = sql.OpenDB(conn)
		waits = sql.OpenDB(conn)
		if split {
			renew = sql.OpenDB(conn)
		}
	}
	waits.SetMaxOpenConns(maxQueued)
	waits.SetMaxIdleConns(1)
	waits.SetConnMaxIdleTime(time.Minute)
	general := cfg.pool
	if renew != nil {
		general--
		renew.SetMaxOpenConns(1)
		renew.SetMaxIdleConns(1)
		renew.SetConnMaxIdleTime(5 * time.Minute)
	}
	db.SetMaxOpenConns(general)
	db.SetMaxIdleConns(general)
	db.SetConnMaxIdleTime(5 * time.Minute)
	return db, renew, waits, listen, nil
}

// mysqlConfig turns a mysql:// URL into the driver's configuration (its
// DSN form, user:pass@tcp(host:port)/db, is not a URL).
func mysqlConfig(cfg *config, log *slog.Logger) (*mysql.Config, error) {
	u := cfg.u
	mc := mysql.NewConfig()
	if u.User != nil {
		mc.User = u.User.Username()
		mc.Passwd, _ = u.User.Password()
	}
	if cfg.password != nil {
		mc.Passwd = *cfg.password
	}
	mc.Net = "tcp"
	mc.Addr = u.Host
	if _, _, err := net.SplitHostPort(u.Host); err != nil {
		mc.Addr = net.JoinHostPort(u.Hostname(), "3306")
	}
	mc.DBName = cfg.database
	mc.Timeout = cfg.dial
	mc.DialFunc = cfg.dialFn
	// One round trip per statement: the driver fills in the arguments
	// itself instead of preparing each statement on the server.
	mc.InterpolateParams = true
	// A reader's or permit's grant and release are each one script of
	// statements (pipeline.go), whose arguments go into its first.
	mc.MultiStatements = true
	// The upserts read the columns they assigned before, as MySQL assigns
	// from left to right; MariaDB's SIMULTANEOUS_ASSIGNMENT mode would
	// have every assignment read the old row, and a grant leave its token
	// where it was. Every connection takes the mode off for itself
	// (MySQL has no such mode: its sql_mode stays as it was).
	mc.Params = map[string]string{"sql_mode": noSimultaneousAssignment}
	cfg.driverLog = &mysqlLogger{log: log}
	mc.Logger = cfg.driverLog
	if v := u.Query().Get("tls"); v != "" {
		mc.TLSConfig = v // checked by mysql.NewConnector
	}
	if cfg.tls != nil {
		mc.TLS = withServerName(cfg.tls, u.Hostname())
	}
	if v := u.Query().Get("application_name"); v != "" {
		// As PostgreSQL's: it names the connections on the server (in
		// performance_schema.session_connect_attrs).
		if strings.ContainsAny(v, ",:") {
			return nil, fmt.Errorf("%w: mysql application_name=%q may not contain ',' or ':'", backends.ErrInvalidOption, v)
		}
		mc.ConnectionAttributes = "program_name:" + v
	}
	return mc, nil
}

// noSimultaneousAssignment is the session's sql_mode without
// SIMULTANEOUS_ASSIGNMENT, the rest of it as the server set it.
const noSimultaneousAssignment = "TRIM(BOTH ',' FROM REPLACE(CONCAT(',', @@SESSION.sql_mode, ','), ',SIMULTANEOUS_ASSIGNMENT,', ','))"

// requireTLS makes every host of pc (its first, and the others, which pgx
// keeps as fallbacks) take TLS with t, verifying the host's name. pgx's
// default sslmode=prefer would also try each host in plain text.
func requireTLS(pc *pgx.ConnConfig, t *tls.Config) {
	pc.TLSConfig = withServerName(t, pc.Host)
	seen := map[string]bool{net.JoinHostPort(pc.Host, strconv.Itoa(int(pc.Port))): true}
	var fbs []*pgconn.FallbackConfig
	for _, f := range pc.Fallbacks {
		k := net.JoinHostPort(f.Host, strconv.Itoa(int(f.Port)))
		if seen[k] {
			continue
		}
		seen[k] = true
		fbs = append(fbs, &pgconn.FallbackConfig{Host: f.Host, Port: f.Port, TLSConfig: withServerName(t, f.Host)})
	}
	pc.Fallbacks = fbs
}

// withServerName returns t, or a clone of it that verifies host when t
// names no server.
func withServerName(t *tls.Config, host string) *tls.Config {
	if t.ServerName != "" {
		return t
	}
	t = t.Clone()
	t.ServerName = host
	return t
}

// mysqlLogger routes the MySQL driver's messages (a connection dropped,
// say) to the Locker's logger instead of the process's stderr. It keeps
// the last one: for a connection that broke, the driver returns only
// "invalid connection" or "bad connection", and logs why (a TLS alert
// such as an expired client certificate), which explain adds to Open's
// error.
type mysqlLogger struct {
	log  *slog.Logger
	last atomic.Pointer[string]
}

func (l *mysqlLogger) Print(v ...any) {
	msg := fmt.Sprint(v...)
	l.last.Store(&msg)
	l.log.Debug(msg, "backend", "mysql")
}

// explain adds the driver's last message, if it logged one, to err when
// err is the driver's bare "invalid connection" or "bad connection". The
// logger is new with the Locker, so any message is from this Open.
func (l *mysqlLogger) explain(err error) error {
	if l == nil || err == nil || !errors.Is(err, mysql.ErrInvalidConn) && !strings.Contains(err.Error(), "bad connection") {
		return err
	}
	if msg := l.last.Load(); msg != nil {
		return fmt.Errorf("%w (the driver logged: %s)", err, *msg)
	}
	return err
}

// redact removes u's password from err's text.
func redact(err error, u *url.URL) string {
	s := err.Error()
	if u.User == nil {
		return s
	}
	if p, ok := u.User.Password(); ok && p != "" {
		s = strings.ReplaceAll(s, p, "xxxxx")
	}
	return s
}

// channelName is the NOTIFY channel of the table with identity ident: one
// per table, so that Lockers on different tables never wake each other.
func channelName(ident string) string {
	sum := sha256.Sum256([]byte(ident))
	return "padlock_" + hex.EncodeToString(sum[:12])
}
