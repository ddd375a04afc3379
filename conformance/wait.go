package conformance

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/padlock-go/padlock"
)

// testTimeoutAndCancel checks that bounded and cancelled waits return within
// their bound with the right errors, and leave no trace on the server: the
// next TryLock after the release must succeed, even on a fair queue. Each
// waiter is a fresh Locker, shown to be waiting (see seenWaiting) before
// its wait ran out or was cancelled. A waiter granted the lock because its
// holder lost it first, by the rules, is tried again (granted).
func testTimeoutAndCancel(e *env) {
	a := e.locker()
	name := e.name("w")
	lk := e.lock(a, e.ctx, name)
	const wait = time.Second
	slack := 5 * time.Second // a bound, not a speed claim

	// granted handles a waiter granted the lock where its wait should have
	// run out or been cancelled. That is allowed only if the holder lost
	// the lock first, by the rules (its renewals unanswered on a loaded
	// machine: Done closed with ErrLost before the grant, where the
	// backend promises it); the waiter's hold is then given back, the lock
	// taken again, and the case tried again. A grant while the holder's
	// Done is open is two holders at once.
	granted := func(how string, got *padlock.Lock) {
		e.Helper()
		e.lostFirst(how+": a waiter", lk, isOpen(lk.Done()))
		e.Logf("%s: the holder lost the lock before the wait ended (%v), and the waiter got it by the rules; the lock is taken again", how, lk.Err())
		e.unlock(got)
		lk = e.lock(a, e.ctx, name)
	}

	timedOut := func(how string, call func(l *padlock.Locker, proof padlock.Option) (*padlock.Lock, error)) {
		e.Helper()
		// A loaded machine may run a short wait out before the suite looks
		// at the server, or its holder may lose the lock: such a try is
		// made again, up to three times, each on a fresh Locker.
		for try := 1; ; try++ {
			b := e.locker()
			opt, proof := waitProof()
			type result struct {
				lk  *padlock.Lock
				err error
			}
			res := make(chan result, 1)
			returned := make(chan struct{})
			start := time.Now()
			var took time.Duration
			go func() {
				lk, err := call(b, opt)
				took = time.Since(start)
				res <- result{lk, err}
				close(returned)
			}()
			waited := e.seenWaiting(b, proof, 2, returned)
			r := <-res
			if r.err == nil && try < 3 {
				granted(how, r.lk)
				continue
			}
			if !errors.Is(r.err, padlock.ErrTimeout) || !errors.Is(r.err, context.DeadlineExceeded) {
				e.Fatalf("%s: err = %v, want ErrTimeout and context.DeadlineExceeded (the holder's Done open %v, Err %v)",
					how, r.err, isOpen(lk.Done()), lk.Err())
			}
			if took < wait || took > wait+slack {
				e.Errorf("%s: returned after %v, want between %v and %v", how, took, wait, wait+slack)
			}
			e.stateLen(1)
			if waited {
				return
			}
			if try == 3 {
				e.Fatalf("%s: in %d tries the Lock call was never seen waiting before its wait ran out", how, try)
			}
			e.Logf("%s: try %d timed out before the suite saw it wait; trying again", how, try)
		}
	}
	timedOut("WithWait", func(b *padlock.Locker, proof padlock.Option) (*padlock.Lock, error) {
		return b.Lock(e.ctx, name, padlock.WithWait(wait), proof)
	})
	timedOut("ctx deadline", func(b *padlock.Locker, proof padlock.Option) (*padlock.Lock, error) {
		dctx, cancel := context.WithTimeout(e.ctx, wait)
		defer cancel()
		return b.Lock(dctx, name, proof)
	})

	// Cancel a waiter once it is shown waiting (again, if its holder lost
	// the lock to it first).
	for try := 1; ; try++ {
		b := e.locker()
		cctx, cancelWait := context.WithCancel(e.ctx)
		type result struct {
			lk  *padlock.Lock
			err error
		}
		res := make(chan result, 1)
		returned := make(chan struct{})
		opt, proof := waitProof()
		go func() {
			lk, err := b.Lock(cctx, name, opt)
			res <- result{lk, err}
			close(returned)
		}()
		waited := e.seenWaiting(b, proof, 2, returned)
		cancelWait()
		r := <-res
		if r.err == nil && try < 3 {
			granted("cancelled wait", r.lk)
			continue
		}
		if !waited {
			e.Fatalf("cancelled wait: the Lock call returned (%v) before it was seen waiting", r.err)
		}
		if !errors.Is(r.err, context.Canceled) || errors.Is(r.err, padlock.ErrTimeout) {
			e.Fatalf("cancelled wait: err = %v, want context.Canceled and not ErrTimeout (the holder's Done open %v, Err %v)",
				r.err, isOpen(lk.Done()), lk.Err())
		}
		break
	}
	if s := e.state(); len(s) != 1 {
		e.Fatalf("after three abandoned waits the server holds %q, want only the holder", s)
	}
	e.unlock(lk)
	c := e.locker()
	lk2, err := c.TryLock(e.ctx, name)
	if err != nil {
		e.Fatalf("TryLock after release, with abandoned waiters gone: %v", err)
	}
	e.unlock(lk2)
}

// testFIFO checks that waiters are served in arrival order where the
// backend says it is fair.
func testFIFO(e *env) {
	a := e.locker()
	if !e.caps.FairFIFO {
		e.Skip("backend is not fair (Capabilities.FairFIFO is false)")
	}
	const waiters = 5
	name := e.name("f")
	lk := e.lock(a, e.ctx, name)
	order := make(chan int, waiters)
	errs := make(chan error, waiters)
	for i := range waiters {
		l := e.locker()
		go func() {
			lk, err := l.Lock(e.ctx, name)
			if err != nil {
				errs <- err
				return
			}
			order <- i
			errs <- lk.Unlock(e.ctx)
		}()
		e.stateLen(i + 2) // the holder and i+1 queued waiters
	}
	e.unlock(lk)
	for range waiters {
		if err := <-errs; err != nil {
			e.Fatal(err)
		}
	}
	for want := range waiters {
		if got := <-order; got != want {
			e.Fatalf("waiter %d acquired in place %d: not FIFO", got, want)
		}
	}
}

// testCancelInQueue cancels a waiter with another waiting behind it: the
// cancelled one returns context.Canceled and leaves nothing behind, and the
// other keeps waiting for the holder, not jumping ahead (in a fair queue)
// nor taking the lock while it is held (on any backend). Each waiter is
// shown to be waiting first (see awaitWaiting).
func testCancelInQueue(e *env) {
	a, b, c, d := e.locker(), e.locker(), e.locker(), e.locker()
	name := e.name("q")
	lk := e.lock(a, e.ctx, name)
	var holding atomic.Bool
	holding.Store(true)

	bctx, cancelB := context.WithCancel(e.ctx)
	bres := make(chan error, 1)
	bopt, bproof := waitProof()
	go func() { _, err := b.Lock(bctx, name, bopt); bres <- err }()
	e.awaitWaiting(b, bproof, 2)
	cres := make(chan error, 1)
	copt, cproof := waitProof()
	go func() {
		lk, err := c.Lock(e.ctx, name, copt)
		if err == nil {
			if holding.Load() {
				err = errors.New("the waiter behind a cancelled waiter acquired while the holder still held")
			}
			if uerr := lk.Unlock(e.ctx); err == nil {
				err = uerr
			}
		}
		cres <- err
	}()
	e.awaitWaiting(c, cproof, 3)
	cancelB()
	if err := <-bres; !errors.Is(err, context.Canceled) {
		e.Fatalf("cancelled waiter: %v", err)
	}
	if e.caps.FairFIFO {
		e.stateLen(2)
	}
	e.notAcquirable(d, e.ctx, name) // a round trip for a wrongly woken waiter to show itself
	select {
	case err := <-cres:
		e.Fatalf("waiter returned while the holder still held: %v", err)
	default:
	}
	holding.Store(false)
	e.unlock(lk)
	if err := <-cres; err != nil {
		e.Fatal(err)
	}
}
