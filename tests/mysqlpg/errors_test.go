package mysqlpg_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/mysqlpg"
)

// withQuery returns raw with its path set to path (if not empty) and
// query parameter k set to v ("" removes it).
func withQuery(t *testing.T, raw, path, k, v string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if path != "" {
		u.Path = path
	}
	q := u.Query()
	if v == "" {
		q.Del(k)
	} else {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// A database the server does not have is a mistake in the URL
// (ErrInvalidURL, with the server's words), not an outage: retrying will
// not mend it. PostgreSQL's errors say only what matters: pgx's default
// sslmode=prefer tries TLS first, and a server without TLS refused that
// attempt, which every error used to report before its real cause.
func TestOpenMisconfigured(t *testing.T) {
	servers(t)
	ctx := context.Background()
	pgPrefer := withQuery(t, pg.URL(), "", "sslmode", "") // pgx's default: prefer
	for _, tc := range []struct {
		url  string
		want error
		msg  string
	}{
		{withQuery(t, pgPrefer, "/nosuchdb", "", ""), padlock.ErrInvalidURL, `database "nosuchdb" does not exist (SQLSTATE 3D000)`},
		{withQuery(t, pg.URL(), "/nosuchdb", "", ""), padlock.ErrInvalidURL, `database "nosuchdb" does not exist (SQLSTATE 3D000)`},
		{strings.Replace(pgPrefer, "padlock:padlock@", "padlock:wrong@", 1), padlock.ErrAccessDenied, "password authentication failed"},
		// MariaDB says "unknown database" to a user who may see it, and
		// "access denied" to one who may not (the app user).
		{withQuery(t, maria.AdminURL(), "/nosuchdb", "", ""), padlock.ErrInvalidURL, "Unknown database 'nosuchdb'"},
		{withQuery(t, maria.URL(), "/nosuchdb", "", ""), padlock.ErrAccessDenied, "nosuchdb"},
	} {
		l, err := padlock.Open(ctx, tc.url)
		if err == nil {
			l.Close()
			t.Errorf("Open(%s) succeeded", padlock.RedactURL(tc.url))
			continue
		}
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Open(%s) = %v, want %v mentioning %q", padlock.RedactURL(tc.url), err, tc.want, tc.msg)
		}
		if errors.Is(err, padlock.ErrUnavailable) {
			t.Errorf("Open(%s) = %v: a configuration error, not an outage", padlock.RedactURL(tc.url), err)
		}
		if strings.Contains(err.Error(), "refused TLS") {
			t.Errorf("Open(%s) = %v: reports the TLS attempt of sslmode=prefer", padlock.RedactURL(tc.url), err)
		}
	}
}

// An advisory lock belongs to its connection. When the connection is
// gone (here killed by the server), the server has freed the lock, and
// Unlock says so: ErrNotHeld, not an outage retried in the background.
func TestAdvisoryUnlockAfterKill(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.kind, func(t *testing.T) {
			ctx := context.Background()
			h := newHarness(t, srv, mysqlpg.ModeAdvisory)
			defer h.Close()
			// A long lease: no renewal finds the connection dead first.
			a, b := h.open(t, padlock.WithTTL(time.Minute)), h.open(t)
			lk, err := a.Lock(ctx, "killed")
			if err != nil {
				t.Fatal(err)
			}
			if n, err := h.terminate(ctx, a); err != nil || n == 0 {
				t.Fatalf("terminate: %d connections, %v", n, err)
			}
			err = lk.Unlock(ctx)
			if !errors.Is(err, padlock.ErrNotHeld) || errors.Is(err, padlock.ErrUnavailable) || strings.Contains(err.Error(), "background") {
				t.Errorf("Unlock of a hold whose connection the server killed: %v, want ErrNotHeld", err)
			}
			// And it is true: the lock is free.
			lk2, err := b.TryLock(ctx, "killed")
			if err != nil {
				t.Fatalf("TryLock after the holder's connection was killed: %v", err)
			}
			if err := lk2.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
