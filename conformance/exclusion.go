package conformance

import (
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/padlock-go/padlock"
)

// testMutualExclusion runs goroutines on several Lockers through one lock.
// The critical section checks for overlap directly, performs a deliberately
// racy read-modify-write that loses updates under any overlap (with a few
// milliseconds' work inside), and checks that each holder's token is above
// the previous holder's; afterwards the holds' intervals must not overlap
// (holdLog).
func testMutualExclusion(e *env) {
	const lockers, goroutines, rounds = 3, 4, 8
	name := e.name("x")
	var (
		inside, counter, entered atomic.Int64
		lastToken                atomic.Uint64
		wg                       sync.WaitGroup
		fails                    failures
		log                      holdLog
	)
	fail := fails.add
	ls := e.lockersN(lockers)
	for _, l := range ls {
		for range goroutines {
			wg.Go(func() {
				for range rounds {
					lk, err := l.Lock(e.ctx, name)
					if err != nil {
						fail(err)
						return
					}
					got := time.Now()
					entered.Add(1)
					if n := inside.Add(1); n != 1 {
						fail(errors.New("two holders inside the critical section"))
					}
					if prev := lastToken.Swap(lk.Token()); e.caps.MonotonicTokens && lk.Token() <= prev {
						fail(errors.New("token did not increase across holders"))
					}
					v := counter.Load()
					runtime.Gosched()
					work()
					counter.Store(v + 1)
					inside.Add(-1)
					log.held(name, got, false, lk.Token())
					if err := lk.Unlock(e.ctx); err != nil {
						fail(err)
					}
				}
			})
		}
	}
	wg.Wait()
	fails.report(e)
	log.check(e)
	// Count the critical sections that ran: a Lock that failed (reported
	// above) increments nothing, and is no lost update.
	if got, want := counter.Load(), entered.Load(); got != want {
		e.Errorf("counter = %d after %d exclusive increments: updates were lost to overlapping holders", got, want)
	}
}

// testTryLockHeld checks that TryLock fails at once on a held name, and that
// goroutines without an owner never share a hold.
func testTryLockHeld(e *env) {
	a, b := e.locker(), e.locker()
	name := e.name("t")
	lk := e.lock(a, e.ctx, name)
	// The holder keeps the lock until both attempts return: a TryLock that
	// waited for the holder would hang here until the watchdog fires.
	e.notAcquirable(b, e.ctx, name)
	e.notAcquirable(a, e.ctx, name) // same Locker, no owner: its own holder

	// An owner whose Lock is waiting for a name (held by b) on this
	// Locker: its TryLock must not wait for that Lock either. The Lock is
	// shown to be waiting first, or the TryLock would not be tested
	// against it.
	other := e.name("o")
	lkb := e.lock(b, e.ctx, other)
	job := padlock.WithOwner(e.ctx, "job")
	res := make(chan error, 1)
	opt, proof := waitProof()
	go func() {
		lk, err := a.Lock(job, other, opt)
		if err == nil {
			err = lk.Unlock(e.ctx)
		}
		res <- err
	}()
	e.awaitWaiting(a, proof, 3)
	e.notAcquirable(a, job, other)
	e.unlock(lkb)
	if err := <-res; err != nil {
		e.Fatalf("owner's waiting Lock: %v", err)
	}
	e.unlock(lk)

	lk2, err := b.TryLock(e.ctx, name)
	if err != nil {
		e.Fatalf("TryLock on a free name: %v", err)
	}
	if e.caps.MonotonicTokens && lk2.Token() <= lk.Token() {
		e.Errorf("token %d after %d", lk2.Token(), lk.Token())
	}
	e.unlock(lk2)
}

// manyLocksTTL is ManyLocks' shortest lease. 5s was too short at a load
// average of 15 on 2 cores: an embedded etcd, built with -race in the test
// process, answered the session's keep-alive (queued behind the thousand
// acquisitions' Txns) after more than 3s, and the first hold was lost.
const manyLocksTTL = 10 * time.Second

// testManyLocks holds 1,000 names at once on one Locker: exclusion holds
// for each, and the renewal loop keeps every one of them alive past its
// first renewal.
//
// Its lease is at least manyLocksTTL: a thousand acquisitions load the
// server, and a renewal queued behind them (etcd answers a keep-alive
// only once it has applied what it committed) must still come within the
// lease on a loaded machine. The shortest lease each backend takes is the
// MinTTL subtest's.
func testManyLocks(e *env) {
	const n, parallel = 1000, 32
	ttl := max(e.ttl, manyLocksTTL)
	a, b := e.locker(padlock.WithTTL(ttl)), e.locker(padlock.WithTTL(ttl))
	held := make([]*padlock.Lock, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	var failed atomic.Int64
	first := time.Now()
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			lk, err := a.Lock(e.ctx, e.name("n/"+strconv.Itoa(i)))
			if err != nil {
				failed.Add(1)
				e.Errorf("Lock #%d: %v", i, err)
				return
			}
			held[i] = lk
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		e.FailNow()
	}
	// The first holds are renewed a third of the way into their lease:
	// hold them past half of it, so that the renewal loop has renewed them
	// (with the others, in one batch where the driver batches).
	if wait := time.Until(first.Add(ttl / 2)); wait > 0 {
		time.Sleep(wait) // the property: holds outlive their first renewal
	}
	for i := 0; i < n; i += 97 {
		lk := held[i]
		other, err := b.TryLock(e.ctx, lk.Name())
		// A lost hold is a failure of its own, not an exclusion failure:
		// check Done before judging the TryLock.
		if !isOpen(lk.Done()) {
			if err == nil {
				other.Unlock(e.ctx)
			}
			e.Fatalf("hold %q of %d lost (renewals fell behind?): %v", lk.Name(), n, lk.Err())
		}
		if err == nil {
			other.Unlock(e.ctx)
			e.Fatalf("TryLock(%q) succeeded while another owner holds it", lk.Name())
		}
		if !errors.Is(err, padlock.ErrNotAcquired) {
			e.Fatalf("TryLock(%q) = %v, want ErrNotAcquired", lk.Name(), err)
		}
	}
	e.stateLen(n)
	// A thousand releases behind a thousand holds' renewals, on a loaded
	// machine, can outlast one release's request bound: such a release
	// says ErrUnavailable and goes on in the background, as documented.
	// The property is that every hold is freed, and stateLen(0) asserts
	// it; any other error fails.
	background := 0
	for _, lk := range held {
		switch err := lk.Unlock(e.ctx); {
		case err == nil:
		case errors.Is(err, padlock.ErrUnavailable):
			background++
		default:
			e.Fatalf("Unlock(%q): %v", lk.Name(), err)
		}
	}
	if background > 0 {
		e.Logf("%d of %d releases went on in the background (ErrUnavailable)", background, n)
	}
	e.stateLen(0)
}
