package padlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/padlock-go/padlock"
	_ "github.com/padlock-go/padlock/all"
)

// A query that does not parse is ErrInvalidURL on every scheme, naming the
// parameter and never printing a password. url.URL.Query drops such a part
// silently: "mode=advisory;" opened in lease mode, "fair=true;ttl=5s"
// non-fair. The ports refuse: Open must fail before it dials.
func TestQueryThatDoesNotParse(t *testing.T) {
	cases := map[string]string{
		"mem":            "mem://x?client=a;ttl=5s",
		"etcd":           "etcd://root:s3cret@127.0.0.1:1/p?ttl=5s;dial_timeout=1s",
		"etcds":          "etcds://root:s3cret@127.0.0.1:1/p?ttl=5s;dial_timeout=1s",
		"redis":          "redis://:s3cret@127.0.0.1:1/0?fair=true;ttl=5s",
		"rediss":         "rediss://:s3cret@127.0.0.1:1/0?fair=true;ttl=5s",
		"redis+cluster":  "redis+cluster://:s3cret@127.0.0.1:1/?fair=true;ttl=5s",
		"redis+sentinel": "redis+sentinel://:s3cret@127.0.0.1:1/m?fair=true;ttl=5s",
		"redlock":        "redlock://:s3cret@127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/?drift=0.01;ttl=5s",
		"zk":             "zk://127.0.0.1:1/p?digest=alice:s3cret;ttl=5s",
		"zks":            "zks://127.0.0.1:1/p?digest=alice:s3cret;ttl=5s",
		"postgres":       "postgres://app:s3cret@127.0.0.1:1/db?mode=advisory;",
		"postgresql":     "postgresql://app:s3cret@127.0.0.1:1/db?mode=advisory;",
		"mysql":          "mysql://app:s3cret@127.0.0.1:1/db?table=bad-name;drop",
		"x-silent":       "x-silent://host?wait=1s;ttl=5s", // TestOpenDeadlineIsUnavailable's: the portable layer refuses it first
	}
	params := map[string]string{"x-silent": "wait", "mem": "client", "etcd": "ttl", "etcds": "ttl", "redlock": "drift",
		"zk": "digest", "zks": "digest", "postgres": "mode", "postgresql": "mode", "mysql": "table"}
	for _, scheme := range padlock.Schemes() {
		if scheme == "x-nil" {
			continue // TestRegisterPanics's
		}
		raw, ok := cases[scheme]
		if !ok {
			t.Errorf("scheme %s:// has no case here: add one", scheme)
			continue
		}
		param := params[scheme]
		if param == "" {
			param = "fair"
		}
		t.Run(scheme, func(t *testing.T) {
			l, err := padlock.Open(context.Background(), raw)
			if err == nil {
				l.Close()
				t.Fatalf("Open(%q) succeeded", padlock.RedactURL(raw))
			}
			want := `url parameter "` + param + `" contains ";"`
			if !errors.Is(err, padlock.ErrInvalidURL) || !strings.Contains(err.Error(), want) {
				t.Errorf("Open(%q) = %v, want ErrInvalidURL saying %s", padlock.RedactURL(raw), err, want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("Open's error shows the password: %v", err)
			}
			if red := padlock.RedactURL(raw); strings.Contains(red, "s3cret") {
				t.Errorf("RedactURL(%q) = %q, which shows the password", raw, red)
			}
		})
	}
}

// A bad %-escape in the query is ErrInvalidURL too, with the escape named.
func TestQueryBadEscape(t *testing.T) {
	_, err := padlock.Open(context.Background(), "mem://x?client=%zz")
	if !errors.Is(err, padlock.ErrInvalidURL) || !strings.Contains(err.Error(), `"client": invalid URL escape "%zz"`) {
		t.Errorf("Open with client=%%zz = %v, want ErrInvalidURL naming the parameter and the escape", err)
	}
	if got := padlock.RedactURL("zk://h:2181/p?digest=alice:s3cret%zz"); strings.Contains(got, "s3cret") {
		t.Errorf("RedactURL of a query with a bad escape = %q, which shows the password", got)
	}
}
