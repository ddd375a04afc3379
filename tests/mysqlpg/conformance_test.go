package mysqlpg_test

import (
	"testing"

	"github.com/padlock-go/padlock/conformance"
)

// TestConformance runs the whole suite in both modes on both databases.
func TestConformance(t *testing.T) {
	for _, srv := range servers(t) {
		for _, mode := range []string{"lease", "advisory"} {
			t.Run(srv.kind+"/"+mode, func(t *testing.T) {
				conformance.Run(t, func(t *testing.T) conformance.Harness { return newHarness(t, srv, mode) })
			})
		}
	}
}
