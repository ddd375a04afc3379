// Package conformance is the test suite that every padlock backend runs
// against a real server: conformance.Run(t, newHarness,
// conformance.Promises(caps)). It exercises the portable API only, gates
// expectations on Capabilities (never on a backend's name) and pins them
// to the promises it is given, guards each subtest with a watchdog, and
// checks after each one that the backend holds no state and no goroutine
// leaked.
package conformance

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/padlock-go/padlock"
)

// Harness connects the suite to one backend configuration. Run builds a
// fresh one for every subtest.
type Harness interface {
	// NewLocker opens a new, independent Locker with its own client, so
	// that Cut and Kill can affect it alone. The suite closes it.
	NewLocker(ctx context.Context, opts ...padlock.OpenOption) (*padlock.Locker, error)

	// TTL is the lease the suite uses: short, and no shorter than the
	// backend's minimum.
	TTL() time.Duration

	// State lists every piece of lock state the backend keeps in this
	// harness's namespace, one entry per key, queue entry or waiter record,
	// read directly from the server. Fencing counters and the records of
	// forced releases (ForcedReleases), kept on purpose, are left out.
	State(ctx context.Context) ([]string, error)

	// Close frees what the harness started for this subtest.
	Close() error
}

// Faults are optional interfaces: a harness implements those it can
// inject, and declares those it cannot (Limited, with the reason). A
// subtest that needs a fault the harness declared missing is skipped; one
// that needs a fault the harness neither has nor declared fails.

// Cutter is implemented by harnesses that can cut one client off from the
// server, as a partition would, until restore is called: the client sees
// errors at once.
type Cutter interface {
	Cut(ctx context.Context, l *padlock.Locker) (restore func() error, err error)
}

// Killer is implemented by harnesses that can kill one client abruptly: its
// connection or session dies without releasing anything. The suite still
// calls l.Close after.
type Killer interface {
	Kill(ctx context.Context, l *padlock.Locker) error
}

// Restarter is implemented by harnesses that can stop the server and start
// it again with its data.
type Restarter interface {
	RestartServer(ctx context.Context) error
}

// Blackholer is implemented by harnesses that can make the server silent to
// one client: its packets are dropped while its connections stay open, so
// the client sees no error, only silence. The restore function heals it.
type Blackholer interface {
	Blackhole(ctx context.Context, l *padlock.Locker) (restore func() error, err error)
}

// LeakIgnorer is implemented by harnesses whose own tooling (a server
// process's log reader, a fault-injecting proxy) runs goroutines that are
// not the backend's: the suite's leak check leaves those alone.
type LeakIgnorer interface {
	IgnoreLeaks() []goleak.Option
}

// Stopper is implemented by harnesses that can take the server down for
// every client, old and new, the way a crashed server is down: connections
// are refused. start brings it back with its data.
type Stopper interface {
	StopServer(ctx context.Context) (start func(context.Context) error, err error)
}

// SilentOpener is implemented by harnesses that can open a Locker on a
// path to the server that accepts connections and swallows every byte (a
// blackholed endpoint, padlocktest.Silent): no refusal, no answer, only
// silence, as from a host whose server hangs. padlock.Open must still
// give up, with ErrUnavailable, within the backend's dial and request
// timeouts.
type SilentOpener interface {
	OpenSilent(ctx context.Context, opts ...padlock.OpenOption) (*padlock.Locker, error)
}

// Failoverer is implemented by harnesses whose server is several nodes
// and that can fail it over: the node that serves writes (a leader, a
// primary) dies, another takes its place with the data the service
// acknowledged, and the old one comes back as a follower. Failover
// returns once the service is whole again.
type Failoverer interface {
	Failover(ctx context.Context) error
}

// SubtestTimeout is the watchdog of each subtest: past it, the suite panics
// with every goroutine's stack instead of hanging the run.
const SubtestTimeout = 3 * time.Minute

type subtest struct {
	name string
	fn   func(e *env)
}

var subtests = []subtest{
	{"MutualExclusion", testMutualExclusion},
	{"TryLockHeld", testTryLockHeld},
	{"TimeoutAndCancel", testTimeoutAndCancel},
	{"Reentrancy", testReentrancy},
	{"ReentrancyConcurrent", testReentrancyConcurrent},
	{"UnlockErrors", testUnlockErrors},
	{"Tokens", testTokens},
	{"FIFO", testFIFO},
	{"CancelInQueue", testCancelInQueue},
	{"Renewal", testRenewal},
	{"ClientDeath", testClientDeath},
	{"DoneOnLoss", testDoneOnLoss},
	{"DoneOnSilentLoss", testDoneOnSilentLoss},
	{"ServerRestartWhileWaiting", testRestartWhileWaiting},
	{"ManyLocks", testManyLocks},
	{"ServerDown", testServerDown},
	{"ContextDone", testContextDone},
	{"NilContext", testNilContext},
	{"InputErrors", testInputErrors},
	{"NameMapping", testNameMapping},
	{"ClosedLocker", testClosedLocker},
	{"Holders", testHolders},
	{"WatchHolders", testWatchHolders},
	{"NoLeaks", testNoLeaks},
	{"NoGrowthPerHold", testNoGrowthPerHold},
	{"PushWakeup", testPushWakeup},
	{"HandoffTimed", testHandoffTimed},
	{"MinTTL", testMinTTL},
	{"FencingSurvivesFailover", testFencingSurvivesFailover},
	{"ServerSilent", testServerSilent},
	{"ReadersShare", testReadersShare},
	{"ReadWriteStress", testReadWriteStress},
	{"QueuedWriterBlocksReaders", testQueuedWriterBlocksReaders},
	{"ReadWriteOwner", testReadWriteOwner},
	{"DoneOnLostReader", testDoneOnLostReader},
	{"SemaphoreLimit", testSemaphoreLimit},
	{"SemaphoreStress", testSemaphoreStress},
	{"SemaphoreMismatch", testSemaphoreMismatch},
	{"SemaphoreOwner", testSemaphoreOwner},
	{"PermitFreedOnDeath", testPermitFreedOnDeath},
	{"DoneOnLostPermit", testDoneOnLostPermit},
	{"LockAllStress", testLockAllStress},
	{"LockAllAllOrNothing", testLockAllAllOrNothing},
	{"LockAllErrors", testLockAllErrors},
	{"LockAllAtOnce", testLockAllAtOnce},
	{"DoneOnLostMember", testDoneOnLostMember},
	{"ElectionTerms", testElectionTerms},
	{"ElectionOneLeader", testElectionOneLeader},
	{"ElectionFIFO", testElectionFIFO},
	{"ElectionCancel", testElectionCancel},
	{"ElectionInput", testElectionInput},
	{"ElectionLeaderKilled", testElectionLeaderKilled},
	{"ElectionLeaderCut", testElectionLeaderCut},
	{"ElectionLeaderSilenced", testElectionLeaderSilenced},
	{"Observe", testObserve},
}

// Option changes what Run runs.
type Option func(*runConfig)

type runConfig struct {
	only     map[string]bool // nil: every subtest
	promises *padlock.Capabilities
}

// Promises pins what the configuration under test promises, and Run needs
// it: a subtest fails if its first Locker reports other Capabilities. The
// suite's checks follow the Capabilities a Locker reports (no token
// checks without MonotonicTokens, no order checks without FairFIFO, no
// Done-before-regrant check without DoneBeforeRegrant, no recipe checks
// without SharedLocks, Limits or Elections), and a field left out of a
// struct literal is false: a driver that stopped promising something
// would turn the checks of it off and still pass. Every field is compared
// but MinTTL and HoldsSurviveRestart, which the server's configuration
// sets (each backend's own tests check those).
func Promises(caps padlock.Capabilities) Option {
	return func(c *runConfig) { c.promises = &caps }
}

// checkPromises fails e if got differs from want in a field Promises pins.
func (e *env) checkPromises(want *padlock.Capabilities, got padlock.Capabilities) {
	e.Helper()
	if want == nil {
		return
	}
	w := *want
	w.MinTTL, w.HoldsSurviveRestart = got.MinTTL, got.HoldsSurviveRestart
	if w != got {
		e.Fatalf("Capabilities() = %+v, want %+v (conformance.Promises; MinTTL and HoldsSurviveRestart not compared)", got, w)
	}
}

// Subtests makes Run run only the subtests named (MutualExclusion, FIFO,
// ...), for a configuration whose other subtests another run already
// covers. A name that is no subtest fails the test, so that a name
// misspelt or retired does not quietly run nothing.
func Subtests(names ...string) Option {
	return func(c *runConfig) {
		if c.only == nil {
			c.only = map[string]bool{}
		}
		for _, n := range names {
			c.only[n] = true
		}
	}
}

// Run runs every subtest against harnesses made by newHarness, or those
// the options choose.
func Run(t *testing.T, newHarness func(t *testing.T) Harness, opts ...Option) {
	var c runConfig
	for _, o := range opts {
		o(&c)
	}
	if c.promises == nil {
		t.Fatal("conformance: Run needs the configuration's promises (conformance.Promises), so that a Locker reporting fewer cannot turn checks off")
	}
	for name := range c.only {
		if !slices.ContainsFunc(subtests, func(st subtest) bool { return st.name == name }) {
			t.Fatalf("conformance: no subtest is called %q", name)
		}
	}
	for _, st := range subtests {
		if c.only != nil && !c.only[st.name] {
			continue
		}
		t.Run(st.name, func(t *testing.T) {
			ignore := []goleak.Option{goleak.IgnoreCurrent()}
			h := newHarness(t)
			if li, ok := h.(LeakIgnorer); ok {
				ignore = append(ignore, li.IgnoreLeaks()...)
			}
			ctx, cancel := context.WithTimeout(context.Background(), SubtestTimeout)
			watchdog := time.AfterFunc(SubtestTimeout+10*time.Second, func() {
				panic(fmt.Sprintf("conformance: %s still running after %v\n\n%s", t.Name(), SubtestTimeout, stacks()))
			})
			e := &env{T: t, h: h, ctx: ctx, ttl: h.TTL(), promises: c.promises}
			defer func() {
				watchdog.Stop()
				cancel()
				if !t.Failed() {
					VerifyNoLeaks(t, ignore...)
				}
			}()
			defer h.Close()
			defer e.finish()
			e.unsupported = unsupported(t, h)
			st.fn(e)
		})
	}
}

// LeakGrace is how long a goroutine may outlive the Close that ended its
// work before it counts as leaked. Client libraries end some goroutines on
// their own schedule (go-redis's pool re-dials once a second until it sees
// that its pool closed); a goroutine still there after this is a leak.
const LeakGrace = 10 * time.Second

// VerifyNoLeaks fails t if goroutines other than those ignore names are
// still running LeakGrace from now. The suite calls it after every subtest;
// fault and backend tests outside this package may call it the same way.
func VerifyNoLeaks(t testing.TB, ignore ...goleak.Option) {
	t.Helper()
	deadline := time.Now().Add(LeakGrace)
	for {
		err := goleak.Find(ignore...) // retries for about a second itself
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("goroutines still running %v after the subtest: %v", LeakGrace, err)
			return
		}
	}
}

// env is one subtest's view: its harness, its lockers and its context.
type env struct {
	*testing.T
	h       Harness
	ctx     context.Context
	ttl     time.Duration
	lockers []*padlock.Locker
	caps    padlock.Capabilities
	// faulted is set once the subtest asks the harness for a fault
	// (faultFeatures): its state may then outlive Close until leases end.
	faulted bool
	// promises is what Run was told the configuration promises: caps must
	// match it (Promises).
	promises *padlock.Capabilities
	// unsupported is what the harness declared it cannot offer.
	unsupported map[Feature]string
}

// locker opens a new independent Locker with the harness TTL.
func (e *env) locker(opts ...padlock.OpenOption) *padlock.Locker {
	e.Helper()
	l, err := e.h.NewLocker(e.ctx, append([]padlock.OpenOption{padlock.WithTTL(e.ttl)}, opts...)...)
	if err != nil {
		e.Fatalf("NewLocker: %v", err)
	}
	if len(e.lockers) == 0 {
		e.caps = l.Capabilities()
		e.lockers = append(e.lockers, l) // closed by finish even if the check fails
		e.checkPromises(e.promises, e.caps)
		return l
	}
	e.lockers = append(e.lockers, l)
	return l
}

// finish closes every Locker and checks that the server holds no state of
// this subtest: a key left behind is a failure.
func (e *env) finish() {
	for _, l := range e.lockers {
		if err := l.Close(); err != nil {
			e.Logf("Close: %v", err) // a killed client cannot release; its lease expires
		}
	}
	if e.Failed() {
		return
	}
	empty := func(s []string) bool { return len(s) == 0 }
	if !e.faulted {
		// Nothing was taken away: every Unlock and Close released what it
		// held, so nothing may be left for a lease's end to remove (which
		// comes no sooner than two thirds of a lease after the last
		// renewal). A wait of half a lease tells the two apart.
		e.waitState("no state left after Close, with no fault injected (released, not left to expire)", e.ttl/2, empty)
		return
	}
	// A killed or cut client's leftovers expire with its lease.
	e.waitState("no state left after Close", 3*e.ttl+10*time.Second, empty)
}

// name returns a lock name unique to the subtest.
func (e *env) name(suffix string) string {
	return "conformance/" + strings.ReplaceAll(e.Name(), "/", "-") + "/" + suffix
}

// state reads the server's lock state.
func (e *env) state() []string {
	e.Helper()
	s, err := e.h.State(e.ctx)
	if err != nil {
		e.Fatalf("State: %v", err)
	}
	return s
}

// waitState polls the server until ok accepts its state, or fails the test.
func (e *env) waitState(what string, within time.Duration, ok func([]string) bool) []string {
	e.Helper()
	return WaitState(e.ctx, e.T, e.h, what, within, ok)
}

// WaitState polls h's server state until ok accepts it and returns it, or
// fails t after within: a condition, not a sleep. A read of the state that
// fails is asked again until within runs out. Fault and backend tests
// outside this package use it as the suite does.
func WaitState(ctx context.Context, t testing.TB, h Harness, what string, within time.Duration, ok func([]string) bool) []string {
	t.Helper()
	var (
		s   []string
		err error
	)
	wctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	// A failed read is asked again, as an unmet condition is: right
	// after a server restart the harness's own connection may not be
	// back yet (ZooKeeper's, on a loaded machine). Only a read that
	// still fails when within runs out fails the test.
	if Poll(wctx, 10*time.Millisecond, func() bool { s, err = h.State(ctx); return err == nil && ok(s) }) != nil {
		if err != nil {
			t.Fatalf("%s: State still failing after %v: %v", what, within, err)
		}
		t.Fatalf("%s: not reached within %v; server state: %q", what, within, s)
	}
	return s
}

// stateLen waits until the server holds exactly n entries.
func (e *env) stateLen(n int) {
	e.Helper()
	e.waitState(fmt.Sprintf("%d entries on the server", n), 30*time.Second, func(s []string) bool { return len(s) == n })
}

func (e *env) lock(l *padlock.Locker, ctx context.Context, name string, opts ...padlock.Option) *padlock.Lock {
	e.Helper()
	lk, err := l.Lock(ctx, name, opts...)
	if err != nil {
		e.Fatalf("Lock(%q): %v", name, err)
	}
	return lk
}

func (e *env) unlock(lk *padlock.Lock) {
	e.Helper()
	if err := lk.Unlock(e.ctx); err != nil {
		e.Fatalf("Unlock(%q): %v", lk.Name(), err)
	}
}

// notAcquirable checks that l cannot take name right now.
func (e *env) notAcquirable(l *padlock.Locker, ctx context.Context, name string) {
	e.Helper()
	lk, err := l.TryLock(ctx, name)
	if err == nil {
		lk.Unlock(e.ctx)
		e.Fatalf("TryLock(%q) succeeded while another owner holds it", name)
	}
	if !errors.Is(err, padlock.ErrNotAcquired) {
		e.Fatalf("TryLock(%q) = %v, want ErrNotAcquired", name, err)
	}
}

// lostFirst requires that holder, whose name another call was granted,
// had lost it by the rules first: its Done closed with ErrLost (renewals
// unanswered on a loaded machine), and, where the backend promises it,
// before the grant. open is whether holder's Done was open when the grant
// returned; what names the call. A grant while Done stays open is two
// holders at once.
func (e *env) lostFirst(what string, holder *padlock.Lock, open bool) {
	e.Helper()
	if open && e.caps.DoneBeforeRegrant {
		e.Fatalf("%s was granted while the holder's Done was open", what)
	}
	select {
	case <-holder.Done():
	case <-time.After(e.ttl + 10*time.Second):
		e.Fatalf("%s was granted, and the holder's Done is still open %v later", what, e.ttl+10*time.Second)
	}
	if !errors.Is(holder.Err(), padlock.ErrLost) {
		e.Fatalf("%s was granted; the holder's Err = %v, want ErrLost", what, holder.Err())
	}
}

func isOpen(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

func stacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}
