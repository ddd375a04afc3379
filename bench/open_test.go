package bench

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/padlock-go/padlock"
)

// Open refuses what padlock.Open refuses: a query part that does not parse
// (the benchmark's own clients would drop it), and it never shows the
// URL's password. The ports refuse: Open must fail before it dials.
func TestOpenRefusesBadURL(t *testing.T) {
	for raw, want := range map[string]string{
		"redis://:s3cret@127.0.0.1:1/?fair=true;prefix=x":              `url parameter "fair" contains ";"`,
		"postgres://app:s3cret@127.0.0.1:1/db?sslmode=disable;table=x": `url parameter "sslmode" contains ";"`,
		"etcd://root:s3cret@127.0.0.1:1/p\x7f":                         "invalid control character",
	} {
		g, err := Open(context.Background(), raw)
		if err == nil {
			g.Close()
			t.Errorf("Open(%q) succeeded", padlock.RedactURL(raw))
			continue
		}
		if !errors.Is(err, padlock.ErrInvalidURL) || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q) = %v, want ErrInvalidURL saying %s", padlock.RedactURL(raw), err, want)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open's error shows the password: %v", err)
		}
	}
}
