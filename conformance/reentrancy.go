package conformance

import (
	"errors"
	"sync"

	"github.com/padlock-go/padlock"
)

// testReentrancy checks counted reentrancy by owner, and that different
// owners, no owner, and the same owner on another Locker all exclude.
func testReentrancy(e *env) {
	a, b := e.locker(), e.locker()
	name := e.name("r")
	job7 := padlock.WithOwner(e.ctx, "job-7")
	l1 := e.lock(a, job7, name)
	l2 := e.lock(a, job7, name)
	l3, err := a.TryLock(job7, name)
	if err != nil {
		e.Fatalf("reentrant TryLock: %v", err)
	}
	if l1.Token() != l2.Token() || l2.Token() != l3.Token() {
		e.Errorf("reentrant handles have tokens %d, %d, %d; want one hold", l1.Token(), l2.Token(), l3.Token())
	}
	e.notAcquirable(a, padlock.WithOwner(e.ctx, "job-8"), name) // another owner
	e.notAcquirable(a, e.ctx, name)                             // no owner
	e.notAcquirable(b, job7, name)                              // same owner, other Locker
	if s := e.state(); len(s) != 1 {
		e.Errorf("three reentrant handles keep %q on the server, want one entry", s)
	}

	e.unlock(l1)
	e.unlock(l2)
	if !isOpen(l3.Done()) {
		e.Fatalf("last handle's Done closed before its Unlock: %v", l3.Err())
	}
	e.notAcquirable(b, e.ctx, name) // one count left
	if err := l1.Unlock(e.ctx); !errors.Is(err, padlock.ErrNotHeld) {
		e.Errorf("second Unlock of one handle = %v, want ErrNotHeld", err)
	}
	e.notAcquirable(b, e.ctx, name) // a double Unlock must not steal the last count
	e.unlock(l3)
	lk, err := b.TryLock(e.ctx, name)
	if err != nil {
		e.Fatalf("TryLock after the last Unlock: %v", err)
	}
	e.unlock(lk)
}

// testReentrancyConcurrent has one owner lock a free name from many
// goroutines at once: all must share one hold.
func testReentrancyConcurrent(e *env) {
	a, b := e.locker(), e.locker()
	name := e.name("rc")
	owner := padlock.WithOwner(e.ctx, "worker")
	const n = 8
	locks := make([]*padlock.Lock, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			lk, err := a.Lock(owner, name)
			if err != nil {
				e.Errorf("Lock: %v", err)
				return
			}
			locks[i] = lk
		})
	}
	wg.Wait()
	if e.Failed() {
		return
	}
	for _, lk := range locks[1:] {
		if lk.Token() != locks[0].Token() {
			e.Fatalf("one owner got two holds: tokens %d and %d", locks[0].Token(), lk.Token())
		}
	}
	for _, lk := range locks {
		e.notAcquirable(b, e.ctx, name)
		e.unlock(lk)
	}
	e.stateLen(0)
}

// testUnlockErrors checks Unlock's errors and Done after Unlock.
func testUnlockErrors(e *env) {
	a := e.locker()
	lk := e.lock(a, e.ctx, e.name("u"))
	e.unlock(lk)
	if isOpen(lk.Done()) {
		e.Error("Done still open after Unlock")
	}
	if lk.Err() != nil {
		e.Errorf("Err after Unlock = %v, want nil", lk.Err())
	}
	if err := lk.Unlock(e.ctx); !errors.Is(err, padlock.ErrNotHeld) {
		e.Errorf("double Unlock = %v, want ErrNotHeld", err)
	}
}

// testTokens checks that tokens strictly increase across successive holders
// on different Lockers.
func testTokens(e *env) {
	ls := []*padlock.Locker{e.locker(), e.locker(), e.locker()}
	if !e.caps.MonotonicTokens {
		e.Skip("backend does not promise monotonic tokens")
	}
	name := e.name("k")
	var last uint64
	for i := range 12 {
		lk := e.lock(ls[i%len(ls)], e.ctx, name)
		if lk.Token() <= last {
			e.Fatalf("holder %d got token %d after %d", i, lk.Token(), last)
		}
		last = lk.Token()
		e.unlock(lk)
	}
}
