package mysqlpg_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/mysqlpg"
)

// Schema and Migrate, which parse the URL without padlock.Open, refuse a
// query that does not parse instead of dropping the part after the ";"
// and making the default table ("table=bad-name;drop" made padlock_locks).
// The port refuses: Migrate must fail before it dials.
func TestMigrateQueryThatDoesNotParse(t *testing.T) {
	for _, raw := range []string{
		"postgres://app:s3cret@127.0.0.1:1/db?table=bad-name;drop",
		"mysql://app:s3cret@127.0.0.1:1/db?table=bad-name;drop",
	} {
		_, serr := mysqlpg.Schema(raw)
		merr := mysqlpg.Migrate(context.Background(), raw)
		for what, err := range map[string]error{"Schema": serr, "Migrate": merr} {
			if !errors.Is(err, padlock.ErrInvalidURL) || !strings.Contains(err.Error(), `url parameter "table" contains ";"`) {
				t.Errorf("%s(%q) = %v, want ErrInvalidURL naming table", what, padlock.RedactURL(raw), err)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s's error shows the password: %v", what, err)
			}
		}
	}
}
