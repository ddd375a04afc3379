package conformance

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/padlock-go/padlock"
)

// testLockAllStress runs LockAll over overlapping sets of names, each
// goroutine giving them in its own order (some reversed): every call
// completes (no deadlock: the subtest's watchdog would fire), and a
// counter per name shows no two holders of a name at once.
func testLockAllStress(e *env) {
	const lockers, goroutines, rounds = 3, 3, 5
	names := []string{e.name("a"), e.name("b"), e.name("c"), e.name("d")}
	inside := make([]atomic.Int64, len(names))
	var (
		wg    sync.WaitGroup
		fails failures
	)
	fail := fails.add
	for li := range lockers {
		l := e.locker()
		for g := range goroutines {
			// Each goroutine takes three of the four names, in an order of
			// its own.
			pick := []int{(li + g) % 4, (li + g + 1) % 4, (li + g + 2) % 4}
			if g%2 == 1 {
				slices.Reverse(pick)
			}
			set := make([]string, len(pick))
			for i, p := range pick {
				set[i] = names[p]
			}
			wg.Go(func() {
				for range rounds {
					locks, err := l.LockAll(e.ctx, set)
					if err != nil {
						fail(err)
						return
					}
					for i, lk := range locks {
						if lk.Name() != set[i] {
							fail(fmt.Errorf("LockAll returned %q in place %d, asked %q", lk.Name(), i, set[i]))
						}
					}
					for _, p := range pick {
						if n := inside[p].Add(1); n != 1 {
							fail(fmt.Errorf("%d holders of %q at once", n, names[p]))
						}
					}
					runtime.Gosched()
					for _, p := range pick {
						inside[p].Add(-1)
					}
					if err := padlock.UnlockAll(e.ctx, locks); err != nil {
						fail(err)
					}
				}
			})
		}
	}
	wg.Wait()
	fails.report(e)
}

// testLockAllAllOrNothing has LockAll wait for a name another client
// holds, until its wait bound runs out and, again, until it is cancelled:
// each time none of the names is held afterwards and nothing of the call
// is left on the server (the names it had taken are free for others).
func testLockAllAllOrNothing(e *env) {
	a, b, c := e.locker(), e.locker(), e.locker()
	free, held, last := e.name("1"), e.name("2"), e.name("3")
	blocker := e.lock(b, e.ctx, held)

	// Timeout: LockAll takes `free` first (canonical order), waits for
	// `held`, and gives `free` back when its bound runs out.
	opt, proof := waitProof()
	res := make(chan error, 1)
	go func() {
		locks, err := a.LockAll(e.ctx, []string{last, held, free}, padlock.WithWait(e.ttl+5*time.Second), opt)
		if err == nil {
			padlock.UnlockAll(e.ctx, locks)
		}
		res <- err
	}()
	e.awaitWaiting(a, proof, 3) // the blocker, free's hold and the waiter for held
	e.notAcquirable(c, e.ctx, free)
	if err := <-res; !errors.Is(err, padlock.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		e.Fatalf("LockAll over a held name, bounded = %v, want ErrTimeout", err)
	}
	e.stateLen(1) // only the blocker's hold
	for _, n := range []string{free, last} {
		lk, err := c.TryLock(e.ctx, n)
		if err != nil {
			e.Fatalf("%q after a LockAll that timed out: %v; a failed LockAll must hold nothing", n, err)
		}
		e.unlock(lk)
	}

	// Cancel, once the call is seen waiting: on a Locker of its own, which
	// has not waited before (what a WaitWitness needs).
	d := e.locker()
	ctx, cancel := context.WithCancel(e.ctx)
	opt, proof = waitProof()
	go func() {
		locks, err := d.LockAll(ctx, []string{held, free}, opt)
		if err == nil {
			padlock.UnlockAll(e.ctx, locks)
		}
		res <- err
	}()
	e.awaitWaiting(d, proof, 3) // the blocker, free's hold and the waiter for held
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		e.Fatalf("cancelled LockAll = %v, want context.Canceled", err)
	}
	e.stateLen(1)
	e.unlock(blocker)

	// Then it takes them all, each with its own token, in the caller's
	// order.
	locks, err := a.LockAll(e.ctx, []string{last, held, free})
	if err != nil {
		e.Fatalf("LockAll over free names: %v", err)
	}
	for i, want := range []string{last, held, free} {
		if locks[i].Name() != want {
			e.Errorf("LockAll handle %d is %q, want %q", i, locks[i].Name(), want)
		}
	}
	if e.caps.MonotonicTokens && locks[1].Token() <= blocker.Token() {
		e.Errorf("token %d after the blocker's %d", locks[1].Token(), blocker.Token())
	}
	e.stateLen(3)
	if err := padlock.UnlockAll(e.ctx, locks); err != nil {
		e.Fatal(err)
	}
}

// testLockAllErrors checks LockAll's input errors: no names, a name given
// twice, an invalid name; none leaves anything behind.
func testLockAllErrors(e *env) {
	a := e.locker()
	x := e.name("x")
	for _, c := range []struct {
		names []string
		want  error
	}{
		{nil, padlock.ErrInvalidName},
		{[]string{x, e.name("y"), x}, padlock.ErrInvalidName},
		{[]string{x, ""}, padlock.ErrInvalidName},
	} {
		if locks, err := a.LockAll(e.ctx, c.names); !errors.Is(err, c.want) {
			padlock.UnlockAll(e.ctx, locks)
			e.Errorf("LockAll(%q) = %v, want %v", c.names, err, c.want)
		}
	}
	e.stateLen(0)
}

// testDoneOnLostMember cuts a LockAll's holder off while another client
// waits for one of its names: that member's Done closes before the other
// client is granted it.
func testDoneOnLostMember(e *env) {
	c := need[Cutter](e, FeatureCut)
	doneOnLossOf(e, FeatureCut, c.Cut, lossCase{
		hold: func(e *env, a *padlock.Locker, name string) *padlock.Lock {
			locks, err := a.LockAll(e.ctx, []string{name + "/other", name})
			if err != nil {
				e.Fatalf("LockAll: %v", err)
			}
			return locks[1]
		},
		take: mutexLoss.take,
	})
}
