package driverkit_test

import (
	"slices"
	"testing"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

func TestHosts(t *testing.T) {
	for _, c := range []struct {
		raw, port string
		want      []string
		err       error
		msg       string
	}{
		{raw: "x://h:1", want: []string{"h:1"}},
		{raw: "x://a:1,b:2,c:3", want: []string{"a:1", "b:2", "c:3"}},
		{raw: "x://a,b:2", port: "2379", want: []string{"a:2379", "b:2"}},
		{raw: "x://[::1]:2181", want: []string{"[::1]:2181"}},
		{raw: "x://Node-A:1", want: []string{"node-a:1"}}, // host names are not case-sensitive
		{raw: "x:///path", err: backends.ErrInvalidURL, msg: "x:// needs host:port"},
		{raw: "x://h", err: backends.ErrInvalidURL, msg: `"h" in x:// is not host:port`},
		{raw: "x://:2379", err: backends.ErrInvalidURL, msg: "is not host:port"},
		{raw: "x://h:", port: "1", err: backends.ErrInvalidURL, msg: "is not host:port"},
		{raw: "x://h:0", err: backends.ErrInvalidURL, msg: "has no valid port"},
		{raw: "x://h:65536", err: backends.ErrInvalidURL, msg: "has no valid port"},
		// Two entries for one server would count it twice towards a quorum.
		{raw: "x://h:1,H:1", err: backends.ErrInvalidURL, msg: "h:1 appears twice"},
		{raw: "x://h,h:7", port: "7", err: backends.ErrInvalidURL, msg: "appears twice"},
	} {
		got, err := driverkit.Hosts(mustURL(t, c.raw), c.port)
		checkErr(t, "Hosts("+c.raw+")", err, c.err, []string{c.msg})
		if c.err == nil && !slices.Equal(got, c.want) {
			t.Errorf("Hosts(%s, %q) = %q, want %q", c.raw, c.port, got, c.want)
		}
	}
}

func TestCredentials(t *testing.T) {
	for _, c := range []struct{ raw, user, pass string }{
		{raw: "x://h:1"},
		{raw: "x://ann@h:1", user: "ann"},
		{raw: "x://ann:s3cret@h:1", user: "ann", pass: "s3cret"},
		{raw: "x://:s3cret@h:1", pass: "s3cret"},
		{raw: "x://ann:p%40ss@h:1", user: "ann", pass: "p@ss"},
	} {
		user, pass := driverkit.Credentials(mustURL(t, c.raw))
		if user != c.user || pass != c.pass {
			t.Errorf("Credentials(%s) = %q, %q, want %q, %q", c.raw, user, pass, c.user, c.pass)
		}
	}
}
