package mysqlpg

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/padlock-go/padlock"
)

// connect builds the connection pool for cfg, and for PostgreSQL the
// configuration of the listening connection. It dials nothing yet.
func connect(cfg *config, log *slog.Logger) (*sql.DB, *pgx.ConnConfig, error) {
	var (
		db     *sql.DB
		listen *pgx.ConnConfig
	)
	if cfg.dialect == postgres {
		u := *cfg.u
		u.Scheme = SchemePostgres
		pc, err := pgx.ParseConfig(u.String())
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %s", padlock.ErrInvalidURL, redact(err, &u))
		}
		pc.ConnectTimeout = cfg.dial
		listen = pc.Copy()
		db = stdlib.OpenDB(*pc)
	} else {
		mc, err := mysqlConfig(cfg, log)
		if err != nil {
			return nil, nil, err
		}
		conn, err := mysql.NewConnector(mc)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: mysql:// (tls=%q): %v", padlock.ErrInvalidOption, mc.TLSConfig, err)
		}
		db = sql.OpenDB(conn)
	}
	db.SetMaxOpenConns(cfg.pool)
	db.SetMaxIdleConns(cfg.pool)
	db.SetConnMaxIdleTime(5 * time.Minute)
	return db, listen, nil
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
	mc.Net = "tcp"
	mc.Addr = u.Host
	if _, _, err := net.SplitHostPort(u.Host); err != nil {
		mc.Addr = net.JoinHostPort(u.Hostname(), "3306")
	}
	mc.DBName = cfg.database
	mc.Timeout = cfg.dial
	// One round trip per statement: the driver fills in the arguments
	// itself instead of preparing each statement on the server.
	mc.InterpolateParams = true
	mc.Logger = mysqlLogger{log}
	if v := u.Query().Get("tls"); v != "" {
		mc.TLSConfig = v // checked by mysql.NewConnector
	}
	if v := u.Query().Get("application_name"); v != "" {
		// As PostgreSQL's: it names the connections on the server (in
		// performance_schema.session_connect_attrs).
		if strings.ContainsAny(v, ",:") {
			return nil, fmt.Errorf("%w: mysql application_name=%q may not contain ',' or ':'", padlock.ErrInvalidOption, v)
		}
		mc.ConnectionAttributes = "program_name:" + v
	}
	return mc, nil
}

// mysqlLogger routes the MySQL driver's messages (a connection dropped,
// say) to the Locker's logger instead of the process's stderr.
type mysqlLogger struct{ log *slog.Logger }

func (l mysqlLogger) Print(v ...any) { l.log.Debug(fmt.Sprint(v...), "backend", "mysql") }

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
