package mysqlpg

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// refusedTLS is what pgx says of an attempt over TLS to a server that
// does not take TLS.
const refusedTLS = "server refused TLS connection"

// withoutPreferredTLS drops, from pgx's report of a connection that failed,
// the attempts that sslmode=prefer (pgx's default) made over TLS to a
// server that does not take TLS. pgx then tries again in plain text, and
// reports both: every error of such a server carried a "server refused
// TLS connection" line before the one that matters (a wrong password, a
// database that does not exist). The error keeps the original in its chain
// (errors.As still finds the server's *pgconn.PgError); only its message
// loses the line. Any other error is returned as it is.
func withoutPreferredTLS(err error) error {
	ce, ok := err.(*pgconn.ConnectError)
	if !ok {
		return err
	}
	attempts, ok := ce.Unwrap().(interface{ Unwrap() []error })
	if !ok {
		return err
	}
	all := attempts.Unwrap()
	var keep []string
	for _, a := range all {
		if !strings.Contains(a.Error(), refusedTLS) {
			keep = append(keep, a.Error())
		}
	}
	if len(keep) == 0 || len(keep) == len(all) {
		return err // nothing but TLS refusals (sslmode=require), or none
	}
	detail := " " + keep[0]
	if len(keep) > 1 {
		detail = "\n\t" + strings.Join(keep, "\n\t")
	}
	return &connectError{msg: fmt.Sprintf("failed to connect to `user=%s database=%s`:%s", ce.Config.User, ce.Config.Database, detail), err: err}
}

// connectError is a *pgconn.ConnectError with a message of its own.
type connectError struct {
	msg string
	err error
}

func (e *connectError) Error() string { return e.msg }
func (e *connectError) Unwrap() error { return e.err }
