package mysqlpg

import (
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
