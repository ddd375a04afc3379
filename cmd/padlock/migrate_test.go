package main

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/padlocktest"
)

// migrate refuses a URL whose query does not parse. It used to drop the
// part after the ";" and report success on the default table.
func TestMigrateQueryThatDoesNotParse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := padlocktest.Start(t, padlocktest.Postgres)
	u, err := url.Parse(srv.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := u.User.Password()
	if u.RawQuery != "" {
		u.RawQuery += "&"
	}
	u.RawQuery += "table=bad-name;drop"
	for _, args := range [][]string{{"--url", u.String()}, {"--url", u.String(), "--print"}} {
		var out bytes.Buffer
		err := runMigrate(ctx, args, &out)
		if !errors.Is(err, padlock.ErrInvalidURL) || !strings.Contains(err.Error(), `url parameter "table" contains ";"`) {
			t.Errorf("migrate %s = %v (printed %.60q), want ErrInvalidURL naming table", args[2:], err, out.String())
		}
		if err != nil && pw != "" && strings.Contains(err.Error(), pw) {
			t.Errorf("migrate's error shows the password: %v", err)
		}
	}
}
