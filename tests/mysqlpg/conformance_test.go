package mysqlpg_test

import (
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
)

// TestConformance runs the whole suite in advisory mode on both databases.
// Lease mode runs it in TestConformanceTLS, over TLS as a user with the
// least privileges, which skips only WatchHolders where this run does not:
// PostgreSQL follows its lock table only for a user that may replicate.
// So PostgreSQL's lease mode runs WatchHolders here, and nothing else: a
// whole second run would repeat every other subtest for nothing but the
// transport, which the other tests here and the fault suite use.
func TestConformance(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.kind+"/advisory", func(t *testing.T) {
			conformance.Run(t, func(t *testing.T) conformance.Harness { return newHarness(t, srv, "advisory") },
				conformance.Promises(promisedFor(srv.kind, "advisory")))
		})
		if srv.kind == "postgres" {
			t.Run(srv.kind+"/lease", func(t *testing.T) {
				conformance.Run(t, func(t *testing.T) conformance.Harness { return newHarness(t, srv, "lease") },
					conformance.Subtests("WatchHolders"), conformance.Promises(promisedFor(srv.kind, "lease")))
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
			}, conformance.Promises(promisedFor(db.srv.kind, "lease")))
		})
	}
}

// promisedFor is what a database and mode promise (docs/guarantees.md,
// docs/sql.md): the suite fails a Locker that reports other Capabilities.
// CP on one primary, tokens from the row's counter, no fair FIFO (readers,
// permits and candidacies do not queue), fencing across a failover only as
// safe as the replication (not promised); PostgreSQL wakes waiters by
// NOTIFY, MySQL polls; advisory mode's Done may come after the next grant
// when the holder's connection drops.
func promisedFor(kind, mode string) padlock.Capabilities {
	return padlock.Capabilities{Consistency: padlock.CP, MonotonicTokens: true,
		PushWakeup: kind == "postgres", DoneBeforeRegrant: mode == "lease",
		SharedLocks: true, Limits: true, Elections: true}
}
