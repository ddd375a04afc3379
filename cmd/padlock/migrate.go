package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/padlock-go/padlock/mysqlpg"
)

// runMigrate creates the lock table of a postgres:// or mysql:// URL, or
// prints its DDL with --print, for teams that apply DDL themselves.
func runMigrate(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	url := urlFlag(fs, "postgres:// or mysql:// `URL` of the database (default $PADLOCK_URL); its table parameter names the table")
	print := fs.Bool("print", false, "print the CREATE TABLE and CREATE INDEX statements instead of running them")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: padlock migrate [--url URL] [--print]\n\nCreates padlock's lock table unless it exists (SQL backends only).")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("migrate takes no arguments, got %q", fs.Args())}
	}
	if *url == "" {
		return usageError{errors.New("migrate needs --url or $PADLOCK_URL")}
	}
	if *print {
		ddl, err := mysqlpg.Schema(*url)
		if err != nil {
			return asUsage(err)
		}
		_, err = fmt.Fprintln(stdout, ddl+";")
		return err
	}
	if err := mysqlpg.Migrate(ctx, *url); err != nil {
		return asUsage(err)
	}
	fmt.Fprintln(stdout, "padlock: lock table ready")
	return nil
}
