// Package backends is the driver contract: what a padlock backend must
// implement (Driver, Hold), what it is given (Request, Config) and must
// return (Grant, Capabilities, the sentinel errors), the optional
// interfaces a backend may add (LossNotifier, Successor, BatchRenewer, LeaseSharer, MultiAcquirer,
// Inspector, ForceReleaser, ForcedLister), the polling schedules (Retry), and the
// timing policy the portable layer and the drivers share (MinTTL,
// SafetyMargin, Grant.Deadline). The portable layer (package padlock) owns
// everything else: name validation, reentrancy, the renewal loop and Done
// timing, error classification and closed state. A driver only talks to
// its server.
//
// Writing a driver: implement Driver and Hold, keeping the obligation
// written on each method; return the errors of this package (wrapped, with
// the detail), never errors of the root package; register an Opener with
// padlock.Register in init and export the URL scheme as const Scheme. That
// is all a driver takes from the root package, besides padlock.NewLocker
// for a constructor over a caller's client. Package driverkit has the
// helpers padlock's own drivers share (strict URL parameters, TLS, probes,
// request bounds, background cleanup); using it is optional. Run the
// conformance suite (package conformance) against a real server: it checks
// the contract through the portable API. Package
// github.com/padlock-go/padlock/all registers every built-in backend.
package backends

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/url"
	"time"
)

// Opener builds a Driver from a URL whose scheme it registered for. The
// portable layer has already removed the query parameters it owns (ttl, wait);
// the opener must reject any parameter it does not know with ErrInvalidOption
// (driverkit.CheckParams does). It must bound its own wait for the server (a dial
// timeout), whatever ctx says, and report a server it cannot reach as
// ErrUnavailable with the dial error as the cause.
type Opener func(ctx context.Context, u *url.URL, cfg Config) (Driver, error)

// DialFunc opens a connection to addr, as net.Dialer.DialContext does. A
// nil DialFunc is a net.Dialer's.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Config is what Open passes to every backend besides the URL.
type Config struct {
	// Logger receives what the backend and its client library have to say
	// (reconnects, dropped connections). It is never nil: by default it
	// discards everything, because a library must not write to its user's
	// stderr. Drivers silence their client library's own logging and route
	// what matters here.
	Logger *slog.Logger
	// TLS is the configuration an application passed to Open with
	// padlock.WithTLSConfig, or nil. A driver given one connects over TLS
	// with it (URL parameters such as ca= add to a clone).
	TLS *tls.Config
	// Dial, if not nil, opens every connection to the servers (the
	// application's padlock.WithDialer); TLS runs over what it returns.
	Dial DialFunc
}

// Request describes one acquisition.
type Request struct {
	// Name is the validated lock name. The driver maps it onto its own
	// keyspace safely; any valid name (up to 512 bytes of UTF-8 without NUL)
	// must work and must never collide with another name.
	Name string
	// TTL is the lease the caller asks for. The driver may raise it to a
	// server minimum; the Grant it returns says what was granted.
	TTL time.Duration
	// Wait is false for a single attempt that never waits for the holder.
	Wait bool
	// Retry paces polling for drivers that have no push wake-up; drivers
	// that are woken by the server ignore it.
	Retry Retry
	// Owner is the reentrancy owner of the acquisition ("" if none); a
	// driver that records holders (Inspector) stores it with the claim.
	Owner string
	// Mode is Exclusive (a writer, a mutex or a permit) or Shared (a
	// reader); see Mode for the rule that grants each. A driver whose
	// Capabilities lack SharedLocks is never asked for Shared.
	Mode Mode
	// Limit is how many Exclusive holds the name admits at once: 1 for a
	// mutex, a writer and a reader, n for a permit of a semaphore of n. It
	// is never below 1. A driver whose Capabilities lack Limits is only
	// ever asked for 1.
	Limit int
	// Elect makes the acquisition a candidacy in an election (Mode
	// Exclusive, Limit 1): the driver stores Value with the claim, where
	// Elector.Leader reads it and Proclaimer.Proclaim replaces it. A
	// driver whose Capabilities lack Elections is never asked.
	Elect bool
	// Value is a candidacy's value (Elect); empty otherwise.
	Value string
	// NoCancel is true when ctx ends only if the Locker closes: the
	// caller's context can never be cancelled and no wait bound applies.
	// A driver may then send a request inline, bounded by its own Close
	// and request timeout, where it would otherwise send it from another
	// goroutine so as to return at once on a cancellation that leaves the
	// request's outcome unknown.
	NoCancel bool
}

// Driver is one client connection (or set of connections) to a backend.
// Its methods are called concurrently.
type Driver interface {
	// Acquire takes the lock named in req.
	//
	// With req.Wait false it makes one attempt and returns ErrNotAcquired
	// (wrapped) if anyone else holds the name, without waiting for them.
	// With req.Wait true it blocks until the lock is held or ctx is done.
	//
	// When it returns an error, the backend must hold no trace of this
	// attempt: no key, queue entry or waiter record. On ctx done it returns
	// ctx.Err() (wrapped). Failures to reach the server wrap ErrUnavailable.
	// It must never return a nil Hold with a nil error.
	Acquire(ctx context.Context, req Request) (Hold, error)

	// Capabilities reports the guarantees of this configuration.
	Capabilities() Capabilities

	// Close releases the connection. The portable layer calls it once,
	// after every hold was released or abandoned. Server-side state that
	// belongs to this client (a session lease, say) must be removed.
	Close(ctx context.Context) error
}

// Hold is one acquisition of one name.
type Hold interface {
	// Token is the fencing token: it increases strictly across successive
	// holders of the name when Capabilities.MonotonicTokens is true.
	Token() uint64

	// Grant is the lease under which the hold was acquired: the server
	// keeps it at least until Grant().Expiry().
	Grant() Grant

	// Renew extends the hold's lease and returns the new grant. It returns
	// ErrNotHeld (wrapped) when the server says the hold is gone for good,
	// and ErrUnavailable (wrapped) when it cannot tell. Renew is only ever
	// called by the portable layer's renewal loop, one call per hold at a
	// time, and never while Release runs.
	Renew(ctx context.Context) (Grant, error)

	// Release frees the hold, touching nothing but this hold: a release
	// that arrives after the hold expired must never free a newer holder.
	// It returns ErrNotHeld (wrapped) if the hold was already gone.
	Release(ctx context.Context) error
}

// LossNotifier is implemented by holds whose driver can learn between
// renewals that a hold is gone for good: the connection that held it
// failed, and the server freed every lock on it. Lost returns a context
// that the driver cancels at that moment (its cause says why); the
// portable layer then ends the hold with ErrLost at once, instead of at
// its next renewal.
type LossNotifier interface {
	Lost() context.Context
}

// Successor is implemented by holds that can tell which hold of their
// name they directly followed: the one that held it last before this hold
// was granted, with no other hold granted in between. The portable layer
// uses it to time hand-offs (the padlock.handoff.duration metric): when a
// hold that its own Locker released is the one a waiting Lock of that
// Locker followed, both ends are on one clock, and the time from the
// release to the grant is exact.
type Successor interface {
	// Follows returns the token of the hold this one directly followed,
	// and false when the driver cannot tell (a first grant, a wait that
	// ended on a fresh read of the queue). It must never name a hold that
	// another hold came between: a wrong answer would time two hand-offs
	// and a hold as one. Like MonotonicTokens, it may rely on the backend
	// keeping its state: where a failover or restart can take a name's
	// token counter back (FencingSurvivesFailover false), a hand-off
	// across one may be timed wrong, as its tokens are wrong then too.
	Follows() (token uint64, ok bool)
}

// BatchRenewer is implemented by drivers that can renew many holds in one
// request (one keep-alive per session lease, one pipelined script call, one
// UPDATE for every row of a client). The portable layer's renewal loop then
// renews every hold that is due in one call instead of one call per hold.
type BatchRenewer interface {
	// RenewBatch renews holds, which all came from this driver, and returns
	// one result per hold, in order, with Renew's contract for each.
	RenewBatch(ctx context.Context, holds []Hold) []RenewResult
}

// LeaseSharer is implemented by drivers whose holds are kept by a lease
// that many of them share (etcd: a session's lease; ZooKeeper: a
// session), so that one renewal of the lease renews every hold under it.
// The portable layer's renewal loop then schedules each lease once, with
// its holds, instead of each hold: keeping many holds costs one renewal
// per lease and a check per hold, not a renewal per hold.
type LeaseSharer interface {
	// LeaseOf returns the lease that keeps h, a comparable value that
	// does not change while h is held, or nil when h is renewed on its
	// own (Renew). A hold's Grant under a lease is a grant of that lease.
	LeaseOf(h Hold) any

	// RenewLease renews lease, whose latest acknowledged grant is have,
	// and checks holds, every one of them under it: it returns the
	// lease's new grant, which then serves every hold not reported gone,
	// and gone[i] non-nil (ErrNotHeld, wrapped) for each hold the server
	// says is gone (gone may be nil when none is). err is for the lease as
	// a whole: ErrNotHeld (wrapped) when the lease is gone and every hold
	// with it, ErrUnavailable (wrapped) when it cannot tell. It must not
	// change any hold on the server, only the lease: a hold may be
	// released, or changed by Share or Proclaim, while its lease is being
	// renewed.
	RenewLease(ctx context.Context, lease any, have Grant, holds []Hold) (g Grant, gone []error, err error)
}

// RenewResult is the outcome of renewing one hold in a batch.
type RenewResult struct {
	// Grant is the hold's new grant when Err is nil.
	Grant Grant
	// Err is nil on success, and otherwise what Renew would have
	// returned for this hold alone: ErrNotHeld (wrapped) when the server
	// says it is gone, ErrUnavailable (wrapped) when it cannot tell. One
	// hold's failure must not fail the others.
	Err error
}

// Grant is a server's promise, as far as the client can prove it: the lease
// lasts at least TTL from Sent.
type Grant struct {
	// Sent is the local time, read before the request that the server
	// acknowledged was sent. The server starts its TTL no earlier than this.
	Sent time.Time
	// TTL is the lease length that the server actually granted.
	TTL time.Duration
}

// Expiry is the earliest moment at which the server may expire the lease,
// measured on the local clock.
func (g Grant) Expiry() time.Time { return g.Sent.Add(g.TTL) }

// Consistency says how a backend behaves under partitions.
type Consistency string

// Consistency models.
const (
	// CP backends keep mutual exclusion through partitions and failovers at
	// the cost of availability: a minority side cannot acquire.
	CP Consistency = "CP"
	// AP backends stay available under some faults but may grant a lock
	// twice after a failover, a partition or a clock jump.
	AP Consistency = "AP"
)

// Capabilities are the guarantees a backend configuration offers. The
// conformance suite gates its expectations on these fields, never on a
// backend's name; the fault suite (padlock faults, docs/guarantees.md)
// measures them under injected faults.
type Capabilities struct {
	// Consistency is CP or AP.
	Consistency Consistency
	// FairFIFO means waiters are granted the lock in arrival order.
	FairFIFO bool
	// MonotonicTokens means fencing tokens strictly increase across
	// successive holders of a name while the backend keeps its state.
	MonotonicTokens bool
	// FencingSurvivesFailover means tokens stay monotonic across a server
	// failover or restart (the counter is replicated or persisted before
	// the acquisition is acknowledged).
	FencingSurvivesFailover bool
	// PushWakeup means waiters are woken by the server, not by polling.
	PushWakeup bool
	// DoneBeforeRegrant means a lost hold's Done closes before the server
	// can grant the name to anyone else, whatever happened to the holder:
	// the server keeps the hold for its whole lease even after the client
	// vanished. It holds under the rule's assumptions (docs/lost-lock.md:
	// the server keeps its state, its clock moves at most the safety
	// margin, no operator frees the lease), and that page lists the
	// exceptions the fault suite measured. Backends whose locks belong to
	// a connection (SQL advisory locks) free a lock the moment the server
	// drops the connection, so another client can get it before the old
	// holder's Done fires: false there.
	DoneBeforeRegrant bool
	// MinTTL is the shortest lease a hold gets on this configuration:
	// WithTTL refuses a TTL under the package's MinTTL, and the backend raises
	// one under its server's own minimum (etcd's minimum lease,
	// ZooKeeper's minimum session timeout) to that minimum, and says so in
	// the hold's Grant. Locker.Capabilities reports the larger of the two,
	// so a TTL of MinTTL is always accepted and granted as asked. A driver
	// reports its server's own minimum, or zero if the server grants any
	// TTL padlock accepts.
	MinTTL time.Duration
	// HoldsSurviveRestart says whether a hold the server acknowledged
	// survives a crash and restart of that server. Yes: the server wrote
	// it to durable storage before it answered (etcd's and ZooKeeper's
	// logs, an SQL lease table; Redis with appendonly yes and appendfsync
	// always, on every master). No: a restart forgets holds (Redis
	// without that, SQL advisory locks, the memory backend), so after a
	// restart another client may take a lock before its holder's Done
	// closes. Unknown: the server's configuration decides, and padlock
	// could not read it (a Redis user without CONFIG GET, a server that
	// disabled it). It is not about failover to a replica: see
	// Consistency and FencingSurvivesFailover. Where the server's
	// configuration decides, it is what the configuration was when the
	// Locker opened.
	HoldsSurviveRestart Tristate
	// SharedLocks means the driver grants Shared requests (readers of a
	// read-write lock) by Mode's rule and its holds implement Sharer.
	// Without it, padlock's RLock and TryRLock return ErrUnsupported.
	SharedLocks bool
	// Limits means the driver grants Exclusive requests with a Limit above
	// 1 (permits of a semaphore) by Mode's rule. Without it, padlock
	// returns ErrUnsupported for WithLimit above 1.
	Limits bool
	// Elections means the driver stores candidacies' values (Request.Elect)
	// and implements Elector, and its holds Proclaimer. Without it,
	// padlock's Election returns ErrUnsupported.
	Elections bool
}

// Tristate is Yes, No or Unknown: a guarantee that the server's own
// configuration may decide, and that padlock may not be able to read.
// The zero value is Unknown.
type Tristate uint8

// Tristate values.
const (
	// Unknown: the guarantee depends on what padlock could not read.
	Unknown Tristate = iota
	// Yes: the guarantee holds.
	Yes
	// No: the guarantee does not hold.
	No
)

// String returns "unknown", "yes" or "no".
func (t Tristate) String() string {
	switch t {
	case Yes:
		return "yes"
	case No:
		return "no"
	}
	return "unknown"
}
