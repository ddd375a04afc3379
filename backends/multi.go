package backends

import "context"

// MultiAcquirer is implemented by drivers that can take several names in
// one request to their server (an etcd Txn, one Redis script on one slot,
// one SQL transaction). The portable layer's LockAll asks it first, for
// the whole set, when every name is an exclusive lock of limit 1 that no
// owner of the Locker holds or is acquiring; if it declines, or someone
// else holds a name, LockAll takes the names one by one through Acquire.
type MultiAcquirer interface {
	// AcquireAll makes one attempt, in one request, at every one of reqs:
	// it grants all of them or none, and never waits. Each request is
	// Exclusive with Limit 1, Wait false, no Elect; no two name the same
	// lock; they come in the names' byte order.
	//
	// All granted: one Hold per request, in the same order, each exactly
	// what Acquire would have returned for that name alone (its own
	// Grant, token, Renew, Release and, where the driver has it, Lost).
	// The tokens keep Acquire's promise: where MonotonicTokens holds, each
	// is greater than the token of every hold on its name that ended
	// before.
	//
	// Any name held or queued for by anyone else: ErrNotAcquired
	// (wrapped), and nothing of the attempt is held or left on the server.
	// ErrUnsupported (wrapped), before anything was sent: the driver cannot
	// take this set in one request (names on several Redis Cluster slots,
	// a configuration that queues); the caller then takes the names one by
	// one. Any other error is what Acquire would return, and leaves no
	// trace either.
	AcquireAll(ctx context.Context, reqs []Request) ([]Hold, error)
}
