package mysqlpg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// Schema returns the statements that create the lock table rawURL names
// and its index (its scheme picks the dialect, its table parameter the
// table), for teams that review and apply DDL themselves.
func Schema(rawURL string) (string, error) {
	cfg, err := parseRaw(rawURL)
	if err != nil {
		return "", err
	}
	st, err := cfg.load()
	if err != nil {
		return "", err
	}
	return st.get("schema") + ";\n\n" + st.get("add_parent_index"), nil
}

// Migrate creates the lock table rawURL names unless it exists, and
// brings an older one up to date: its migrations, in order, each run only
// if the table lacks what it adds (so Migrate may run any number of
// times): 1, the holder column; 2, the forced and forced_at columns; 3,
// the columns of readers and permits (kind, lim, slots, parent); 4, the
// columns of elections (elect, elect_value, adv_mark); 5, the index of
// the parent column (readers' and permits' rows by name); 6, on
// PostgreSQL, the table's publication, which WatchHolders decodes. Open does
// the same on first use where it may; Migrate lets a deployment step with
// DDL rights do it, so that the application's own user needs none.
func Migrate(ctx context.Context, rawURL string) error {
	cfg, err := parseRaw(rawURL)
	if err != nil {
		return err
	}
	log := slog.New(slog.DiscardHandler)
	db, renew, waits, _, err := connect(cfg, log)
	if err != nil {
		return err
	}
	defer db.Close()
	for _, other := range []*sql.DB{renew, waits} {
		if other != nil {
			other.Close() // neither is used here; they opened no connection
		}
	}
	st, err := cfg.load()
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
	if err == nil {
		err = drv.ensureParentIndex(dctx)
	}
	if err == nil && drv.d == postgres {
		err = drv.ensurePublication(dctx)
	}
	return cfg.driverLog.explain(err)
}

// ensureParentIndex adds the index of the parent column (migration 5) to
// a lock table made by a padlock that did not have it.
func (drv *driver) ensureParentIndex(ctx context.Context) error {
	return drv.migration(ctx, "parent_index", "add_parent_index", "the index of its parent column")
}

// migration brings the table up to date in one respect, what: it looks
// with the statement check (one row: whether the table has it) and,
// finding it missing, runs add and looks again, so that another client
// adding it meanwhile is no error. A failed look is returned as it is; a
// failed addition names what is missing and padlock migrate.
func (drv *driver) migration(ctx context.Context, check, add, what string) error {
	has := func() (bool, error) {
		var ok bool
		err := drv.db.QueryRowContext(ctx, drv.st.get(check), drv.tableArgs()...).Scan(&ok)
		return ok, err
	}
	ok, err := has()
	if err != nil || ok {
		return drv.d.classify(ctx, "inspect lock table "+drv.cfg.quotedTable(), err)
	}
	_, aerr := drv.db.ExecContext(ctx, drv.st.get(add))
	if ok, err := has(); err == nil && ok {
		return nil // added by us, or by another client meanwhile
	}
	if aerr == nil {
		aerr = errors.New("added, but not found after")
	}
	return fmt.Errorf("lock table %s lacks %s (it was made by an earlier padlock) and adding it failed: %w; run padlock migrate with a user that may alter the table",
		drv.cfg.quotedTable(), what, drv.d.classify(ctx, "alter lock table", aerr))
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
