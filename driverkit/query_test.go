package driverkit_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// mustURL parses raw or fails the test.
func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("url.Parse(%q): %v", raw, err)
	}
	return u
}

// checkErr fails the test unless err matches want (nil: no error) and its
// message contains every one of msgs and none of hidden.
func checkErr(t *testing.T, what string, err, want error, msgs []string, hidden ...string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Errorf("%s: %v, want no error", what, err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Errorf("%s: %v, want %v", what, err, want)
		return
	}
	for _, m := range msgs {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("%s: %q does not say %q", what, err, m)
		}
	}
	for _, h := range hidden {
		if strings.Contains(err.Error(), h) {
			t.Errorf("%s: %q gives away %q", what, err, h)
		}
	}
}

func TestQuery(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want error
		msgs []string
		keys map[string]string
	}{
		{raw: "x://h", keys: map[string]string{}},
		{raw: "x://h?a=1&b=two", keys: map[string]string{"a": "1", "b": "two"}},
		{raw: "x://h?a=%3B", keys: map[string]string{"a": ";"}},
		// url.Values drops these parts without a word; Query refuses them.
		{raw: "x://h?mode=advisory;", want: backends.ErrInvalidURL, msgs: []string{`"mode"`, `";"`, "%3B"}},
		{raw: "x://h?fair=true;ttl=5s", want: backends.ErrInvalidURL, msgs: []string{`"fair"`, `separate parameters with "&"`}},
		{raw: "x://h?ok=1&password=s%zzecret", want: backends.ErrInvalidURL, msgs: []string{`"password"`}},
	} {
		q, err := driverkit.Query(mustURL(t, c.raw))
		checkErr(t, "Query("+c.raw+")", err, c.want, c.msgs, "secret")
		if c.want != nil {
			continue
		}
		if len(q) != len(c.keys) {
			t.Errorf("Query(%s) = %v, want %v", c.raw, q, c.keys)
		}
		for k, v := range c.keys {
			if q.Get(k) != v {
				t.Errorf("Query(%s)[%s] = %q, want %q", c.raw, k, q.Get(k), v)
			}
		}
	}
}

func TestCheckParams(t *testing.T) {
	known := []string{"fair", "prefix"}
	for _, c := range []struct {
		raw  string
		want error
		msgs []string
	}{
		{raw: "x://h"},
		{raw: "x://h?fair=true&prefix=p"},
		{raw: "x://h?fiar=true", want: backends.ErrInvalidOption,
			msgs: []string{`unknown url parameter "fiar" for x://`, "known: ttl, wait, fair, prefix"}},
		// The first unknown parameter in sorted order, whatever the URL's order.
		{raw: "x://h?zz=1&aa=1", want: backends.ErrInvalidOption, msgs: []string{`"aa"`}},
		{raw: "x://h?fair=true&fair=false", want: backends.ErrInvalidOption, msgs: []string{"fair given 2 times"}},
		{raw: "x://h?fair=true;prefix=p", want: backends.ErrInvalidURL, msgs: []string{`"fair"`}},
	} {
		err := driverkit.CheckParams(mustURL(t, c.raw), known...)
		checkErr(t, "CheckParams("+c.raw+")", err, c.want, c.msgs)
	}
}
