package main

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/padlock-go/padlock/padlocktest"
)

// A look that fails is made again within a second or so, however long the
// interval, though no change comes to push it: on PostgreSQL in lease mode,
// which pushes changes, a console with an interval of an hour whose user
// may not read the lock table for a moment (its SELECT revoked) shows the
// error of the look that a hold pushed, and once the user may read again,
// the hold, with nothing pushed in between. Before the retry, the page kept
// the error and its stale holders until the next change or the hour.
func TestConsoleRetriesFailedLook(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg := padlocktest.Start(t, padlocktest.Postgres)
	const table = "console_retry"
	withTable := func(raw string) string {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("table", table)
		u.RawQuery = q.Encode()
		return u.String()
	}
	appURL := withTable(pg.URL())
	u, err := url.Parse(appURL)
	if err != nil {
		t.Fatal(err)
	}
	appUser := u.User.Username()
	_, srv := serveConsoleEvery(t, ctx, appURL, time.Hour, false)
	sctx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	next := nextSnapshot(t, ctx, stream(t, sctx, srv.URL+"/events"))
	if first := next("the first look", func(s snapshot) bool { return true }); !first.Follows || first.Error != "" {
		t.Fatalf("the console does not follow pushed changes, or its first look failed: %+v", first)
	}

	admin, err := pgx.Connect(ctx, pg.AdminDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) }) // after the GRANT below: cleanups run last first
	tbl, user := pgx.Identifier{table}.Sanitize(), pgx.Identifier{appUser}.Sanitize()
	exec := func(stmt string) error {
		_, err := admin.Exec(context.Background(), stmt)
		return err
	}
	if err := exec("REVOKE SELECT ON " + tbl + " FROM " + user); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec("GRANT SELECT ON " + tbl + " TO " + user) })

	// A hold, taken as the administrator (who may still read), is a
	// change the console is pushed, and its look is refused. The hold's
	// lease is an hour, so that no renewal pushes another change before
	// the test ends.
	holder := openTTL(t, ctx, withTable(pg.AdminURL()), time.Hour)
	lk, err := holder.Lock(ctx, "web/retry")
	if err != nil {
		t.Fatal(err)
	}
	next("the refused look", func(s snapshot) bool { return s.Error != "" })
	if err := exec("GRANT SELECT ON " + tbl + " TO " + user); err != nil {
		t.Fatal(err)
	}
	// Nothing is pushed now: only a look of the console's own brings the
	// hold to the page before ctx ends.
	s := next("a look after the grant", func(s snapshot) bool { return s.Error == "" })
	if len(s.Holders) != 1 || s.Holders[0].Token != lk.Token() {
		t.Fatalf("the look after the grant shows %+v, want the hold of token %d", s.Holders, lk.Token())
	}
}
