package mysqlpg

import (
	"fmt"
	"strings"
	"testing"
)

// The statements go to the server without their files' whole-line
// comments (MySQL's driver sends the text with every execution), and
// nothing else of them is lost: the acquire statement keeps its clauses
// and a trailing comment stays where it is.
func TestStatementsWithoutComments(t *testing.T) {
	for _, d := range []*dialect{postgres, mysqlDialect} {
		st, err := d.load("t", "t_parent")
		if err != nil {
			t.Fatal(err)
		}
		for name, text := range st {
			for line := range strings.Lines(text) {
				if strings.HasPrefix(strings.TrimSpace(line), "--") {
					t.Errorf("%s %s keeps a comment line: %q", d.name, name, line)
				}
			}
		}
		if a := st["lease_acquire"]; !strings.HasPrefix(a, "INSERT INTO t") || !strings.Contains(a, "ON") {
			t.Errorf("%s lease_acquire: %q", d.name, a)
		}
		if h := st["lease_holders"]; !strings.Contains(h, "-- no ") {
			t.Errorf("%s lease_holders lost its trailing comment: %q", d.name, h)
		}
	}
	if got := stripComments("-- a\nSELECT 1 -- b\n  -- c\nFROM t\n"); got != "SELECT 1 -- b\nFROM t" {
		t.Errorf("stripComments = %q", got)
	}
}

// The advisory statements take advisory_upsert.sql whole: each included
// assignment once, the two tested first and the rest testing what they
// wrote; and a missing include, or one that includes itself, is an error.
func TestStatementIncludes(t *testing.T) {
	st, err := mysqlDialect.load("t", "t_parent")
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range st {
		if strings.Contains(text, "{{include:") {
			t.Errorf("%s keeps an include: %q", name, text)
		}
	}
	for _, name := range []string{"advisory_acquire", "advisory_try_acquire", "advisory_elect_acquire"} {
		text := st[name]
		for _, assign := range []string{"owner       = IF((expires_at", "adv_key     = IF((expires_at",
			"token       = IF(owner <=> VALUES(owner) AND adv_key <=> VALUES(adv_key), LAST_INSERT_ID(token + 1), token)",
			"expires_at  = IF(owner <=> VALUES(owner) AND adv_key <=> VALUES(adv_key), VALUES(expires_at), expires_at)"} {
			if n := strings.Count(text, assign); n != 1 {
				t.Errorf("%s has %q %d times, want once: %q", name, assign, n, text)
			}
		}
	}
	if !strings.Contains(st["advisory_elect_acquire"], "adv_mark    = IF(owner <=> VALUES(owner) AND adv_key <=> VALUES(adv_key)") {
		t.Errorf("advisory_elect_acquire lost its own assignments: %q", st["advisory_elect_acquire"])
	}
	for _, bad := range []statements{{"a": "SELECT {{include:b}}"}, {"a": "SELECT {{include:a}}"}} {
		if _, err := bad.expand("a"); err == nil {
			t.Errorf("expand(%q) = nil error", bad["a"])
		}
	}
}

// A statement's lists are one array argument each on PostgreSQL, so its
// text is the same for any number of values, and a placeholder per value
// on MySQL, numbered on from the arguments before them.
func TestInArgs(t *testing.T) {
	keys, owners := [][]byte{[]byte("a"), []byte("b")}, []string{"x", "y"}
	stmt, args := postgres.inArgs("k = ANY({{in:keys}}) AND o = ANY({{in:owners}}) AND t > $1", []any{7},
		inList{"keys", keys}, inList{"owners", owners})
	if want := "k = ANY($2) AND o = ANY($3) AND t > $1"; stmt != want {
		t.Errorf("postgres: %q, want %q", stmt, want)
	}
	if len(args) != 3 || args[0] != 7 || len(args[1].([][]byte)) != 2 || len(args[2].([]string)) != 2 {
		t.Errorf("postgres: args %v, want 7, the keys and the owners", args)
	}
	one, _ := postgres.inArgs("k = ANY({{in:keys}})", nil, inList{"keys", keys[:1]})
	if many, _ := postgres.inArgs("k = ANY({{in:keys}})", nil, inList{"keys", keys}); one != many {
		t.Errorf("postgres: %q for one key and %q for two: one statement for any number", one, many)
	}
	stmt, args = mysqlDialect.inArgs("t > ? AND k IN ({{in:keys}}) AND o IN ({{in:owners}})", []any{7},
		inList{"keys", keys}, inList{"owners", owners})
	if want := "t > ? AND k IN (?, ?) AND o IN (?, ?)"; stmt != want {
		t.Errorf("mysql: %q, want %q", stmt, want)
	}
	if want := []any{7, []byte("a"), []byte("b"), "x", "y"}; fmt.Sprint(args) != fmt.Sprint(want) {
		t.Errorf("mysql: args %v, want %v", args, want)
	}
}
