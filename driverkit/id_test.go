package driverkit_test

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

func TestEscapeName(t *testing.T) {
	for _, c := range []struct{ name, special, want string }{
		{"orders/42", "", "orders/42"},
		{"orders/42", "/", "orders%2F42"},
		{"100%", "/", "100%25"}, // '%' always, or "a%2Fb" and "a/b" would meet
		{"a%2Fb", "/", "a%252Fb"},
		{"{tag}x", "{}", "%7Btag%7Dx"},
		{"ü/ß", "/", "ü%2Fß"}, // multi-byte UTF-8 passes as it is
		{"", "/", ""},
	} {
		if got := driverkit.EscapeName(c.name, c.special); got != c.want {
			t.Errorf("EscapeName(%q, %q) = %q, want %q", c.name, c.special, got, c.want)
		}
	}
}

// TestEscapeNameOneToOne checks the promise itself on names built to
// collide: no two names share a segment, and no segment holds a special
// byte.
func TestEscapeNameOneToOne(t *testing.T) {
	const special = "/{}"
	alphabet := []string{"a", "/", "%", "2F", "{", "}", "%2F", "%25", "7B"}
	names := []string{""}
	for range 3 {
		var next []string
		for _, n := range names {
			for _, a := range alphabet {
				next = append(next, n+a)
			}
		}
		names = append(names, next...)
	}
	seen := map[string]string{}
	for _, n := range names {
		e := driverkit.EscapeName(n, special)
		if strings.ContainsAny(e, special) {
			t.Errorf("EscapeName(%q) = %q keeps a special byte", n, e)
		}
		if other, dup := seen[e]; dup && other != n {
			t.Errorf("EscapeName(%q) = EscapeName(%q) = %q", n, other, e)
		}
		seen[e] = n
	}
}

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := driverkit.NewID()
		if b, err := hex.DecodeString(id); err != nil || len(b) != 16 {
			t.Fatalf("NewID() = %q, want 32 hex digits", id)
		}
		if seen[id] {
			t.Fatalf("NewID() repeated %q", id)
		}
		seen[id] = true
	}
}

func TestIdentityOf(t *testing.T) {
	host, _ := os.Hostname()
	before := time.Now().UnixMilli()
	id := driverkit.IdentityOf(backends.Request{Name: "n", Owner: "worker-1"})
	after := time.Now().UnixMilli()
	if id.Host != host || id.PID != os.Getpid() || id.Owner != "worker-1" || id.At < before || id.At > after {
		t.Errorf("IdentityOf = %+v, want host %q, pid %d, owner worker-1, at in [%d, %d]",
			id, host, os.Getpid(), before, after)
	}
}

// MarshalIdentity writes what json.Marshal writes, byte for byte: empty
// fields left out, strings escaped as JSON escapes them (quotes, control
// characters, HTML's <, > and &, invalid UTF-8), this host's name and any
// other.
func TestMarshalIdentity(t *testing.T) {
	hostname, _ := os.Hostname()
	for _, id := range []backends.Identity{
		{},
		driverkit.IdentityOf(backends.Request{}),
		driverkit.IdentityOf(backends.Request{Owner: "worker-7"}),
		{Host: hostname, PID: -3, Owner: "a \"quoted\" <owner> & \\ \n\t\x01 ünï \xff", At: -1},
		{Host: "other<host>", At: 1},
		{PID: 42},
		{Owner: "only"},
	} {
		want, err := json.Marshal(id)
		if err != nil {
			t.Fatal(err)
		}
		if got := driverkit.MarshalIdentity(id); string(got) != string(want) {
			t.Errorf("MarshalIdentity(%#v) = %s, want %s", id, got, want)
		}
	}
}
