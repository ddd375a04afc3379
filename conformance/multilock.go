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
		log   holdLog
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
					got := time.Now()
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
					work()
					for _, p := range pick {
						inside[p].Add(-1)
					}
					for _, lk := range locks {
						log.held(lk.Name(), got, false, lk.Token())
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
	log.check(e)
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

// testLockAllAtOnce checks what LockAll promises whichever way the
// backend takes the set: in one request where the driver can
// (backends.MultiAcquirer: every name free, all granted or none), or
// one by one. Over free names every member is a hold of its own, in the
// caller's order, with a token above every earlier holder's and a Done of
// its own; an owner's LockAll is reentrant per name. With the first name
// (in canonical order) held elsewhere, the one-request try fails and
// leaves nothing (the other names stay free while LockAll waits for the
// first), and the per-name path then waits and takes them all once the
// holder lets go.
func testLockAllAtOnce(e *env) {
	a, b, c := e.locker(), e.locker(), e.locker()
	n1, n2, n3 := e.name("1"), e.name("2"), e.name("3")
	before := map[string]uint64{}
	for _, n := range []string{n1, n2, n3} {
		lk := e.lock(b, e.ctx, n)
		before[n] = lk.Token()
		e.unlock(lk)
	}

	// Free names: all of them, in the caller's order.
	ask := []string{n3, n1, n2}
	locks, err := a.LockAll(e.ctx, ask)
	if err != nil {
		e.Fatalf("LockAll over free names: %v", err)
	}
	for i, lk := range locks {
		if lk.Name() != ask[i] {
			e.Fatalf("LockAll handle %d is %q, want %q", i, lk.Name(), ask[i])
		}
		if e.caps.MonotonicTokens && lk.Token() <= before[ask[i]] {
			e.Errorf("%q: LockAll's token %d, not above the earlier holder's %d", ask[i], lk.Token(), before[ask[i]])
		}
		if !isOpen(lk.Done()) {
			e.Fatalf("%q: Done closed while held: %v", ask[i], lk.Err())
		}
		e.notAcquirable(c, e.ctx, ask[i])
	}
	e.stateLen(3)
	// One member's Unlock ends that member alone.
	e.unlock(locks[1])
	if isOpen(locks[1].Done()) || locks[1].Err() != nil {
		e.Errorf("%q after Unlock: Done open %v, Err %v; want closed, nil", n1, isOpen(locks[1].Done()), locks[1].Err())
	}
	for _, i := range []int{0, 2} {
		if !isOpen(locks[i].Done()) {
			e.Errorf("%q: Done closed when another member was unlocked: %v", ask[i], locks[i].Err())
		}
	}
	next := e.lock(c, e.ctx, n1)
	if e.caps.MonotonicTokens && next.Token() <= locks[1].Token() {
		e.Errorf("%q: token %d after LockAll's %d", n1, next.Token(), locks[1].Token())
	}
	e.unlock(next)
	if err := padlock.UnlockAll(e.ctx, []*padlock.Lock{locks[0], locks[2]}); err != nil {
		e.Fatal(err)
	}
	e.stateLen(0)

	// An owner's LockAll: a Lock of the same owner on a member joins it.
	octx := padlock.WithOwner(e.ctx, "lockall-owner")
	locks, err = a.LockAll(octx, []string{n2, n1})
	if err != nil {
		e.Fatalf("LockAll with an owner: %v", err)
	}
	again, err := a.TryLock(octx, n1)
	if err != nil {
		e.Fatalf("the owner's TryLock on a member of its LockAll: %v", err)
	}
	if again.Token() != locks[1].Token() {
		e.Errorf("the owner's TryLock on %q: token %d, want its LockAll hold's %d", n1, again.Token(), locks[1].Token())
	}
	e.unlock(again)
	e.notAcquirable(c, e.ctx, n1) // the LockAll handle still holds it
	if err := padlock.UnlockAll(e.ctx, locks); err != nil {
		e.Fatal(err)
	}
	e.stateLen(0)

	// The first name held elsewhere: nothing of the failed try is left
	// (the other names stay free while LockAll waits for the first). The
	// last name held: the per-name path takes the others and waits, and a
	// server that queues shows exactly those holds and one waiter (a key
	// the try left would add one, or stall the per-name path behind it).
	lockAllBehind(e, b, c, []string{n3, n2, n1}, 2, 2, []string{n2, n3})
	lockAllBehind(e, b, c, []string{n3, n2, n1}, 0, 4, nil)
}

// lockAllBehind has b hold names[held], LockAll all of names on a new
// Locker, and checks, once it is seen waiting (with entries on the server
// where the backend queues), that c can take each of free; then lets b
// go, and checks that LockAll took every name, above the blocker's token.
func lockAllBehind(e *env, b, c *padlock.Locker, names []string, held, entries int, free []string) {
	e.Helper()
	blocker := e.lock(b, e.ctx, names[held])
	d := e.locker()
	opt, proof := waitProof()
	type result struct {
		locks []*padlock.Lock
		err   error
	}
	res := make(chan result, 1)
	go func() {
		locks, err := d.LockAll(e.ctx, names, opt)
		res <- result{locks, err}
	}()
	e.awaitWaiting(d, proof, entries)
	for _, n := range free {
		lk, err := c.TryLock(e.ctx, n)
		if err != nil {
			e.Fatalf("%q while LockAll waits for %q: %v; the failed one-request try must leave nothing", n, names[held], err)
		}
		e.unlock(lk)
	}
	select {
	case r := <-res:
		padlock.UnlockAll(e.ctx, r.locks)
		e.Fatalf("LockAll returned (%v) while %q was held elsewhere", r.err, names[held])
	default:
	}
	e.unlock(blocker)
	r := <-res
	if r.err != nil {
		e.Fatalf("LockAll after the holder let go: %v", r.err)
	}
	if e.caps.MonotonicTokens && r.locks[held].Token() <= blocker.Token() {
		e.Errorf("%q: token %d after the blocker's %d", names[held], r.locks[held].Token(), blocker.Token())
	}
	e.stateLen(len(names))
	if err := padlock.UnlockAll(e.ctx, r.locks); err != nil {
		e.Fatal(err)
	}
	e.stateLen(0)
}
