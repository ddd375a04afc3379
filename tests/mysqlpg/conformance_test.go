package mysqlpg_test

import (
	"testing"
	"time"

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

// The conformance suite (lease mode), faults included, over mutual TLS as
// a user who may only read and write its lock table, its password read
// from a file.
func TestConformanceTLS(t *testing.T) {
	for _, db := range startTLSDBs(t) {
		t.Run(db.srv.kind, func(t *testing.T) {
			conformance.Run(t, func(t *testing.T) conformance.Harness {
				h := newHarness(t, db.srv, "lease")
				// Leases of 5s: every statement here pays for TLS beside
				// the other packages at the suite's peak load, and with
				// 2s a hold was lost between its grant and its Unlock
				// (safely: the release found the lease gone) in the
				// MutualExclusion subtest.
				h.ttl = 5 * time.Second
				db.prepare(t, h.table)
				return h
			})
		})
	}
}
