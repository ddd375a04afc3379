package mysqlpg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// Schema returns the statement that creates the lock table rawURL names
// (its scheme picks the dialect, its table parameter the table), for teams
// that review and apply DDL themselves.
func Schema(rawURL string) (string, error) {
	cfg, err := parseRaw(rawURL)
	if err != nil {
		return "", err
	}
	st, err := cfg.dialect.load(cfg.quotedTable())
	if err != nil {
		return "", err
	}
	return st.get("schema"), nil
}

// Migrate creates the lock table rawURL names unless it exists, and
// brings an older one up to date: its migrations, in order, each run only
// if the table lacks what it adds (so Migrate may run any number of
// times): 1, the holder column; 2, the forced and forced_at columns; 3,
// the columns of readers and permits (kind, lim, slots, parent); 4, the
// columns of elections (elect, elect_value, adv_mark). Open does
// the same on first use where it may; Migrate lets a deployment step with
// DDL rights do it, so that the application's own user needs none.
func Migrate(ctx context.Context, rawURL string) error {
	cfg, err := parseRaw(rawURL)
	if err != nil {
		return err
	}
	log := slog.New(slog.DiscardHandler)
	db, waits, _, err := connect(cfg, log)
	if err != nil {
		return err
	}
	defer db.Close()
	if waits != nil {
		waits.Close() // no waits here; it opened no connection
	}
	st, err := cfg.dialect.load(cfg.quotedTable())
	if err != nil {
		return err
	}
	drv := &driver{cfg: cfg, d: cfg.dialect, db: db, st: st}
	dctx, cancel := context.WithTimeout(ctx, cfg.dial)
	defer cancel()
	err = drv.ensureTable(dctx)
	if err == nil {
		err = drv.ensureForcedColumns(dctx)
	}
	if err == nil {
		err = drv.ensureSharedColumns(dctx)
	}
	if err == nil {
		err = drv.ensureElectColumns(dctx)
	}
	return cfg.driverLog.explain(err)
}

// parseRaw parses a URL of this backend given whole, as Open would,
// leaving out the portable layer's own parameters.
func parseRaw(rawURL string) (*config, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a password
		}
		return nil, fmt.Errorf("%w: %v", backends.ErrInvalidURL, err)
	}
	switch u.Scheme {
	case SchemePostgres, SchemePostgreSQL, SchemeMySQL:
	default:
		return nil, fmt.Errorf("%w: %q is not a %s://, %s:// or %s:// URL", backends.ErrUnknownScheme, u.Scheme, SchemePostgres, SchemePostgreSQL, SchemeMySQL)
	}
	q, err := driverkit.Query(u) // what Open checks first, which Migrate does not go through
	if err != nil {
		return nil, err
	}
	q.Del("ttl")
	q.Del("wait")
	u.RawQuery = q.Encode()
	return parse(u, nil)
}
