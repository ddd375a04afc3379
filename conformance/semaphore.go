package conformance

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/padlock-go/padlock"
)

// permits is the limit of the semaphore subtests.
const permits = 3

// supportsLimits reports whether the backend offers semaphores. Where it
// does not, it checks that WithLimit above 1 says so (ErrUnsupported) and
// leaves nothing behind, and the subtest ends there.
func supportsLimits(e *env, l *padlock.Locker) bool {
	e.Helper()
	if e.caps.Limits {
		return true
	}
	if lk, err := l.TryLock(e.ctx, e.name("u"), padlock.WithLimit(2)); !errors.Is(err, padlock.ErrUnsupported) {
		if lk != nil {
			lk.Unlock(e.ctx)
		}
		e.Fatalf("WithLimit(2) on a backend without Limits = %v, want ErrUnsupported", err)
	}
	e.stateLen(0)
	return false
}

// testSemaphoreLimit fills a semaphore of n from n Lockers, checks that
// the next one is refused, that each permit has a token of its own, and
// that a freed permit can be taken again with a greater token.
func testSemaphoreLimit(e *env) {
	ls := e.lockersN(permits + 1)
	if !supportsLimits(e, ls[0]) {
		return
	}
	name := e.name("p")
	limit := padlock.WithLimit(permits)
	held := make([]*padlock.Lock, permits)
	tokens := map[uint64]bool{}
	for i := range permits {
		lk, err := ls[i].TryLock(e.ctx, name, limit)
		if err != nil {
			e.Fatalf("permit %d of %d: %v", i+1, permits, err)
		}
		held[i] = lk
		if tokens[lk.Token()] && e.caps.MonotonicTokens {
			e.Errorf("two permits share token %d", lk.Token())
		}
		tokens[lk.Token()] = true
	}
	e.stateLen(permits)
	if lk, err := ls[permits].TryLock(e.ctx, name, limit); !errors.Is(err, padlock.ErrNotAcquired) {
		if lk != nil {
			lk.Unlock(e.ctx)
		}
		e.Fatalf("permit %d of %d = %v, want ErrNotAcquired", permits+1, permits, err)
	}
	e.unlock(held[0])
	lk, err := ls[permits].TryLock(e.ctx, name, limit)
	if err != nil {
		e.Fatalf("a freed permit: %v", err)
	}
	if e.caps.MonotonicTokens && lk.Token() <= held[0].Token() {
		e.Errorf("the permit taken after %d was freed has token %d", held[0].Token(), lk.Token())
	}
	e.unlock(lk)
	for _, h := range held[1:] {
		e.unlock(h)
	}
}

// testSemaphoreStress runs goroutines on several Lockers through one
// semaphore: never more than n inside at once (counted in the test), and
// every permit's token above the token of every permit that had ended
// before it asked.
func testSemaphoreStress(e *env) {
	const lockers, goroutines, rounds = 3, 3, 6
	ls := e.lockersN(lockers)
	if !supportsLimits(e, ls[0]) {
		return
	}
	name := e.name("s")
	var (
		inside, most atomic.Int64
		ended        atomic.Uint64
		wg           sync.WaitGroup
		fails        failures
	)
	fail := fails.add
	for _, l := range ls {
		for range goroutines {
			wg.Go(func() {
				for range rounds {
					before := ended.Load()
					lk, err := l.Lock(e.ctx, name, padlock.WithLimit(permits))
					if err != nil {
						fail(err)
						return
					}
					if e.caps.MonotonicTokens && lk.Token() <= before {
						fail(fmt.Errorf("token %d is not above %d, the token of a permit that ended before it asked", lk.Token(), before))
					}
					n := inside.Add(1)
					if n > permits {
						fail(fmt.Errorf("%d holders inside a semaphore of %d", n, permits))
					}
					raise(&most, n)
					time.Sleep(time.Millisecond) // a holder's work, to let others in beside it
					inside.Add(-1)
					tok := lk.Token()
					if err := lk.Unlock(e.ctx); err != nil {
						fail(err)
					}
					raise(&ended, tok)
				}
			})
		}
	}
	wg.Wait()
	fails.report(e)
	e.Logf("holders inside at once: at most %d of %d", most.Load(), permits)
}

// testSemaphoreMismatch checks that every holder must ask the same limit:
// another limit, a plain Lock and an RLock on a semaphore's name fail at
// once with ErrInvalidOption naming both limits, and leave nothing; so do
// bad limits.
func testSemaphoreMismatch(e *env) {
	a, b := e.locker(), e.locker()
	if !supportsLimits(e, a) {
		return
	}
	name := e.name("m")
	lk, err := a.Lock(e.ctx, name, padlock.WithLimit(permits))
	if err != nil {
		e.Fatalf("Lock with a limit: %v", err)
	}
	// granted handles a mismatched call that was granted: that is allowed
	// only if the permit had been lost first, by the rules (its renewals
	// unanswered on a loaded machine: Done closed with ErrLost, before the
	// grant where the backend promises it), for then no semaphore held the
	// name. The grant is given back, the permit taken again and the case
	// tried again, up to three times. A grant while the permit's Done is
	// open is a mismatch let through.
	granted := func(what string, got *padlock.Lock, try int) {
		e.Helper()
		open := isOpen(lk.Done())
		e.unlock(got)
		e.lostFirst(fmt.Sprintf("%s on a semaphore of %d", what, permits), lk, open)
		if try == 3 {
			e.Fatalf("%s: the permit was lost before the call in each of %d tries (%v): the machine is too slow for this check", what, try, lk.Err())
		}
		e.Logf("%s: the permit was lost first (%v), so the call was granted by the rules; the permit is taken again", what, lk.Err())
		lk = e.lock(a, e.ctx, name, padlock.WithLimit(permits))
	}
	mismatch := func(what string, call func() (*padlock.Lock, error), held, asked int) {
		e.Helper()
		start := time.Now()
		var err error
		for try := 1; ; try++ {
			var got *padlock.Lock
			got, err = call()
			if got == nil {
				break
			}
			granted(what, got, try)
			start = time.Now()
		}
		if !errors.Is(err, padlock.ErrInvalidOption) {
			e.Fatalf("%s on a semaphore of %d = %v, want ErrInvalidOption", what, held, err)
		}
		for _, n := range []int{held, asked} {
			if !strings.Contains(err.Error(), fmt.Sprint(n)) {
				e.Errorf("%s: error %q does not name limit %d", what, err, n)
			}
		}
		if took := time.Since(start); took > 30*time.Second {
			e.Errorf("%s: the mismatch came after %v: it must not wait", what, took)
		}
	}
	mismatch("TryLock with another limit", func() (*padlock.Lock, error) { return b.TryLock(e.ctx, name, padlock.WithLimit(2)) }, permits, 2)
	mismatch("Lock with another limit", func() (*padlock.Lock, error) {
		return b.Lock(e.ctx, name, padlock.WithLimit(permits+1), padlock.WithWait(time.Minute))
	}, permits, permits+1)
	mismatch("a plain Lock", func() (*padlock.Lock, error) { return b.Lock(e.ctx, name, padlock.WithWait(time.Minute)) }, permits, 1)
	if e.caps.SharedLocks {
		mismatch("RLock", func() (*padlock.Lock, error) { return b.RLock(e.ctx, name, padlock.WithWait(time.Minute)) }, permits, 1)
	}
	e.stateLen(1)
	for _, bad := range []func() (*padlock.Lock, error){
		func() (*padlock.Lock, error) { return b.TryLock(e.ctx, e.name("z"), padlock.WithLimit(0)) },
		func() (*padlock.Lock, error) { return b.RLock(e.ctx, e.name("z"), padlock.WithLimit(2)) },
	} {
		if got, err := bad(); !errors.Is(err, padlock.ErrInvalidOption) {
			if got != nil {
				got.Unlock(e.ctx)
			}
			e.Errorf("bad limit = %v, want ErrInvalidOption", err)
		}
	}
	e.unlock(lk)
}

// testSemaphoreOwner checks that an owner's second acquisition shares its
// one permit, and that another limit is refused for it too.
func testSemaphoreOwner(e *env) {
	a, b := e.locker(), e.locker()
	if !supportsLimits(e, a) {
		return
	}
	name := e.name("o")
	job := padlock.WithOwner(e.ctx, "job")
	limit := padlock.WithLimit(2)
	p1 := e.lock(a, job, name, limit)
	p2 := e.lock(a, job, name, limit)
	if p1.Token() != p2.Token() {
		e.Errorf("one owner's two acquisitions have tokens %d and %d: want one permit", p1.Token(), p2.Token())
	}
	e.stateLen(1)
	other, err := b.TryLock(e.ctx, name, limit)
	if err != nil {
		e.Fatalf("the second permit, while one owner holds one twice: %v", err)
	}
	if lk, err := a.TryLock(job, name, padlock.WithLimit(3)); !errors.Is(err, padlock.ErrInvalidOption) {
		if lk != nil {
			lk.Unlock(e.ctx)
		}
		e.Errorf("owner asking its permit with another limit = %v, want ErrInvalidOption", err)
	}
	e.unlock(p1)
	e.unlock(p2)
	e.unlock(other)
}

// testPermitFreedOnDeath kills a permit holder's client while the
// semaphore is full: a waiter gets the permit within the TTL and slack.
func testPermitFreedOnDeath(e *env) {
	k := need[Killer](e, FeatureKill)
	a, b, c := e.locker(), e.locker(), e.locker()
	if !supportsLimits(e, a) {
		return
	}
	name := e.name("d")
	limit := padlock.WithLimit(2)
	dead := e.lock(a, e.ctx, name, limit)
	alive := e.lock(b, e.ctx, name, limit)
	e.injected(FeatureKill, k.Kill(e.ctx, a))
	bound := e.ttl + 5*time.Second // TTL plus slack for a loaded machine
	start := time.Now()
	lk, err := c.Lock(e.ctx, name, limit, padlock.WithWait(bound))
	if err != nil {
		e.Fatalf("after a permit holder's client died, Lock = %v (waited %v)", err, time.Since(start))
	}
	if e.caps.MonotonicTokens && lk.Token() <= dead.Token() {
		e.Errorf("token %d after the dead permit's %d", lk.Token(), dead.Token())
	}
	if !isOpen(alive.Done()) {
		e.Errorf("the other permit holder lost its permit: %v", alive.Err())
	}
	e.unlock(lk)
	e.unlock(alive)
}

// testDoneOnLostPermit cuts a permit holder off while the semaphore is
// full and another client waits: the lost permit's Done closes before the
// waiter is granted.
func testDoneOnLostPermit(e *env) {
	c := need[Cutter](e, FeatureCut)
	if !supportsLimits(e, e.locker()) {
		return
	}
	limit := padlock.WithLimit(2)
	doneOnLossOf(e, FeatureCut, c.Cut, lossCase{
		hold: func(e *env, a *padlock.Locker, name string) *padlock.Lock {
			lk := e.lock(a, e.ctx, name, limit)
			e.lock(e.locker(), e.ctx, name, limit) // fills the semaphore; released by finish
			return lk
		},
		take: func(e *env, b *padlock.Locker, name string, wait time.Duration) (*padlock.Lock, error) {
			return b.Lock(e.ctx, name, limit, padlock.WithWait(wait))
		},
	})
}
