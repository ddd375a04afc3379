package driverkit_test

import (
	"encoding/hex"
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
