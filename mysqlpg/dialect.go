package mysqlpg

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

//go:embed sql
var sqlFiles embed.FS

// dialect is what differs between PostgreSQL and MySQL: the statements,
// identifier quoting, placeholders, how a granted upsert reports its token,
// and which server errors mean the server is out of reach. The locking
// logic is shared.
type dialect struct {
	name string // "postgres" or "mysql": the folder under sql/
	// quote quotes one identifier.
	quote func(string) string
	// placeholder returns the i-th (1-based) placeholder.
	placeholder func(i int) string
	// maxIdent is the longest identifier the server accepts, in bytes.
	maxIdent int
	// returning is true when a granted upsert returns the token as a row
	// (PostgreSQL's RETURNING); otherwise it reports it as affected rows
	// and LAST_INSERT_ID (MySQL).
	returning bool
	// unreachable reports whether a server error means the server cannot
	// serve (shutting down, too many connections), as opposed to refusing
	// the statement.
	unreachable func(error) bool
	// denied reports whether the server refused the credentials or a
	// privilege the statement needs.
	denied func(error) bool
	// misconfigured reports whether the server refused the connection for
	// what the URL asks of it (a database it does not have): no retry
	// will mend that.
	misconfigured func(error) bool
	// retryable reports whether a statement failed only because it lost a
	// race inside the server (a deadlock victim) and can run again.
	retryable func(error) bool
	// idleTimeout is the advisory session's idle timeout parameter for ttl.
	idleTimeout func(ttl time.Duration) any
}

var postgres = &dialect{
	name:        "postgres",
	quote:       func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` },
	placeholder: func(i int) string { return fmt.Sprintf("$%d", i) },
	maxIdent:    63,
	returning:   true,
	unreachable: func(err error) bool {
		var pe *pgconn.PgError
		if !errors.As(err, &pe) {
			return false
		}
		// 08: connection exception; 53: insufficient resources (too many
		// connections); 57P: the server is shutting down or starting, or
		// ended the session; 25006: a read-only server (a standby, or a
		// primary that was demoted in a failover).
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "53") ||
			strings.HasPrefix(pe.Code, "57P") || pe.Code == "25006"
	},
	denied: func(err error) bool {
		var pe *pgconn.PgError
		// 28000: invalid authorization (no pg_hba.conf entry admits the
		// connection); 28P01: a wrong password; 42501: a missing
		// privilege.
		return errors.As(err, &pe) && (pe.Code == "28000" || pe.Code == "28P01" || pe.Code == "42501")
	},
	misconfigured: func(err error) bool {
		var pe *pgconn.PgError
		// 3D000: invalid catalog name (no such database).
		return errors.As(err, &pe) && pe.Code == "3D000"
	},
	retryable: func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
	},
	idleTimeout: func(ttl time.Duration) any {
		ms := min((ttl+time.Millisecond-1)/time.Millisecond, math.MaxInt32) // the setting's range
		return fmt.Sprintf("%dms", ms)
	},
}

var mysqlDialect = &dialect{
	name:        "mysql",
	quote:       func(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" },
	placeholder: func(int) string { return "?" },
	maxIdent:    64,
	unreachable: func(err error) bool {
		var me *mysql.MySQLError
		if !errors.As(err, &me) {
			return false
		}
		switch me.Number {
		case 1040, 1053, 1077, 1079, 1080, 1152, 1158, 1159, 1160, 1161, 1184, 1203, 1927, 3169, 4031,
			1290, 1836:
			// too many connections, shutdown in progress, aborted or
			// killed connections and sessions, network read/write errors,
			// a connection ended for inactivity; a read-only server.
			return true
		}
		return false
	},
	denied: func(err error) bool {
		var me *mysql.MySQLError
		if !errors.As(err, &me) {
			return false
		}
		switch me.Number {
		case 1044, 1045, 1142, 1143, 1227, 1370, 1698, 1820, 1862, 3118, 4151:
			// access denied to a database, for a user (a wrong password),
			// to a table, a column, an operation or a routine; no password
			// given; a password expired; an account locked (MySQL's
			// number, MariaDB's).
			return true
		}
		return false
	},
	misconfigured: func(err error) bool {
		var me *mysql.MySQLError
		// 1049: unknown database. (A user without rights on any database
		// of that name is told 1044, access denied, instead.)
		return errors.As(err, &me) && me.Number == 1049
	},
	retryable: func(err error) bool {
		var me *mysql.MySQLError
		return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
	},
	idleTimeout: func(ttl time.Duration) any {
		return int64((ttl + time.Second - 1) / time.Second)
	},
}

// statements are a dialect's statements for one table.
type statements map[string]string

// load reads the dialect's statements and puts the quoted table name and
// the name of its parent column's index in.
func (d *dialect) load(table, parentIndex string) (statements, error) {
	dir := "sql/" + d.name
	entries, err := sqlFiles.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	st := statements{}
	for _, e := range entries {
		b, err := sqlFiles.ReadFile(dir + "/" + e.Name())
		if err != nil {
			return nil, err
		}
		name, text := strings.TrimSuffix(e.Name(), ".sql"), strings.NewReplacer("{{table}}", table, "{{parent_index}}", parentIndex).Replace(stripComments(string(b)))
		if strings.Contains(text, "{{rows:") {
			// A statement over a VALUES list: its one-row form, and the
			// list's template for repeatRows.
			st[name+":rows"], text = text, repeatRows(text, 1)
		}
		st[name] = text
	}
	// {{include:name}} puts in another file's text: a clause that
	// statements share (advisory_upsert.sql).
	out := make(statements, len(st))
	for name := range st {
		text, err := st.expand(name)
		if err != nil {
			return nil, err
		}
		out[name] = text
	}
	return out, nil
}

// expand returns name's text with each {{include:other}} replaced by
// other's text. An include that is missing, or that includes in turn, is
// an error.
func (st statements) expand(name string) (string, error) {
	text := st[name]
	for {
		start := strings.Index(text, "{{include:")
		if start < 0 {
			return text, nil
		}
		end := strings.Index(text[start:], "}}")
		if end < 0 {
			return "", fmt.Errorf("mysqlpg: %s.sql: an unclosed {{include:", name)
		}
		inc := text[start+len("{{include:") : start+end]
		part, ok := st[inc]
		if !ok || strings.Contains(part, "{{include:") {
			return "", fmt.Errorf("mysqlpg: %s.sql includes %q, which is missing or includes in turn", name, inc)
		}
		text = text[:start] + part + text[start+end+2:]
	}
}

// stripComments drops a statement's whole-line comments. The MySQL driver
// sends a statement's text with every execution (it puts the arguments
// in), so a file's header comment would otherwise cost bytes on the wire
// and parsing on the server at every round trip.
func stripComments(text string) string {
	var b strings.Builder
	for line := range strings.Lines(text) {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line)
		}
	}
	return strings.TrimSpace(b.String())
}

// get returns a statement; a missing one is a bug in this package.
func (st statements) get(name string) string {
	s, ok := st[name]
	if !ok {
		panic("mysqlpg: no statement " + name)
	}
	return s
}

// inList is the values of one of a statement's lists ({{in:name}}):
// [][]byte or []string.
type inList struct {
	name   string
	values any
}

// inArgs fills in stmt's lists with their values, numbered on from the
// arguments in args, and returns the statement and args with the values
// after them. On MySQL each value is a placeholder of its own (the
// statement says IN ({{in:l}})). On PostgreSQL a list is one array
// argument (the statement says = ANY({{in:l}})), so the statement's text,
// and the plan the server keeps for it, is the same whatever the number
// of values: with a placeholder each, a batch of renewals of each size
// was a statement of its own, parsed and planned again, which was most of
// what keeping many holds cost (bench's BenchmarkManyHolds).
func (d *dialect) inArgs(stmt string, args []any, lists ...inList) (string, []any) {
	next := len(args) + 1
	for _, l := range lists {
		var text string
		if d == postgres {
			text = d.placeholder(next)
			next++
			args = append(args, l.values)
		} else {
			var n int
			switch v := l.values.(type) {
			case [][]byte:
				args, n = spread(args, v)
			case []string:
				args, n = spread(args, v)
			default:
				panic(fmt.Sprintf("mysqlpg: a list of %T", l.values))
			}
			ph := make([]string, n)
			for j := range ph {
				ph[j] = d.placeholder(next)
				next++
			}
			text = strings.Join(ph, ", ")
		}
		stmt = strings.Replace(stmt, "{{in:"+l.name+"}}", text, 1)
	}
	return stmt, args
}

// spread appends each of vs to args, and says how many.
func spread[T any](args []any, vs []T) ([]any, int) {
	for _, v := range vs {
		args = append(args, v)
	}
	return args, len(vs)
}

// classify turns the failure of what into padlock's error classes. The
// caller's own context ending stays a context error; refused credentials
// or a missing privilege are ErrAccessDenied; a database the server does
// not have is ErrInvalidURL; a connection that failed (its TLS handshake
// included), a request bound and a server that cannot serve are
// ErrUnavailable; any other statement the server refused (a bad table) is
// returned as it is, since retrying will not help.
func (d *dialect) classify(ctx context.Context, what string, err error) error {
	err = withoutPreferredTLS(err)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, backends.ErrUnavailable), errors.Is(err, backends.ErrNotHeld), errors.Is(err, backends.ErrNotAcquired):
		return err
	case ctx.Err() != nil:
		return driverkit.RequestError(ctx, what, err)
	case d.denied(err):
		return fmt.Errorf("%w: %s: %w", backends.ErrAccessDenied, what, err)
	case d.misconfigured(err):
		return fmt.Errorf("%w: %s: %w", backends.ErrInvalidURL, what, err)
	case d.unreachable(err), isConnError(err), isTLSError(err):
		return driverkit.Unavailable(what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// isTLSError reports whether err is a failed TLS handshake: a certificate
// that does not verify, or the server's alert about ours.
func isTLSError(err error) bool {
	var ve *tls.CertificateVerificationError
	var ae tls.AlertError
	var ue x509.UnknownAuthorityError
	var he x509.HostnameError
	var ie x509.CertificateInvalidError
	return errors.As(err, &ve) || errors.As(err, &ae) || errors.As(err, &ue) || errors.As(err, &he) || errors.As(err, &ie)
}

// isConnError reports whether err is a failure of the connection itself:
// it could not be made, broke, or timed out.
func isConnError(err error) bool {
	var ne net.Error
	var ce *pgconn.ConnectError
	return errors.As(err, &ne) || errors.As(err, &ce) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, sql.ErrConnDone) || errors.Is(err, net.ErrClosed) ||
		pgconn.SafeToRetry(err) || pgconn.Timeout(err) || strings.Contains(err.Error(), "conn closed") ||
		strings.Contains(err.Error(), "bad connection")
}
