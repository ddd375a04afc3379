package conformance

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/padlock-go/padlock"
)

// outageBound is how long any call may take to report a server that is
// down: a request bound and a dial timeout, plus slack for a loaded
// machine. It is a bound against hanging, not a speed claim.
const outageBound = padlock.DefaultRequestTimeout + 10*time.Second

// callerDeadline is the deadline of the "with a caller deadline" cases:
// shorter than any bound of padlock's own.
const callerDeadline = 2 * time.Second

// testServerDown takes the server down under a Locker that holds three
// locks, with another Locker waiting for one of them, and checks that the
// waiter gives up, and that Unlock (first, while the holds are still
// valid), Open, TryLock and Lock each report the outage as
// ErrUnavailable, never as contention (ErrNotAcquired, ErrTimeout), and
// return within a bound whether or not the caller's context has a
// deadline. Once the server is back, nothing may be left behind.
func testServerDown(e *env) {
	st := need[Stopper](e, FeatureStop)
	a, b := e.locker(), e.locker()
	lk1 := e.lock(a, e.ctx, e.name("held-1"))
	lk2 := e.lock(a, e.ctx, e.name("held-2"))
	lk3 := e.lock(a, e.ctx, e.name("held-3"))
	// A waiter already waiting when the server goes, with no deadline of
	// its own: it must give up with ErrUnavailable, not wait for ever.
	type result struct {
		err error
		at  time.Time
	}
	waiting := make(chan result, 1)
	opt, proof := waitProof()
	go func() {
		lk, err := b.Lock(e.ctx, lk3.Name(), opt)
		at := time.Now()
		if err == nil {
			lk.Unlock(e.ctx)
		}
		waiting <- result{err, at}
	}()
	e.awaitWaiting(b, proof, 4)
	start, err := st.StopServer(e.ctx)
	stopped := time.Now()
	e.injected(FeatureStop, err)
	restarted := false
	restart := func() {
		if !restarted {
			restarted = true
			if err := start(e.ctx); err != nil {
				e.Fatalf("starting the server again: %v", err)
			}
		}
	}
	defer restart()

	// check runs one call without and with a caller deadline, one after
	// the other, or at once when parallel (Unlock: both holds must still
	// be valid when their Unlock starts, and the TTL is short).
	// lostFirst says, per Unlock (keyed by withDeadline), that its hold's
	// Done had closed before Unlock was called: on a backend whose holds
	// live on a connection (PostgreSQL's advisory mode), a server that
	// stops closes the connection, and the client may learn that the
	// server freed its locks before the Unlock starts. Unlock then says
	// lost (ErrLost, ErrNotHeld), which is the truth, not an outage.
	var lostFirst sync.Map
	check := func(what string, parallel bool, call func(ctx context.Context, withDeadline bool) error) {
		e.Helper()
		run := func(withDeadline bool) {
			ctx, cancel := e.ctx, context.CancelFunc(func() {})
			bound := outageBound
			how := "no deadline"
			if withDeadline {
				ctx, cancel = context.WithTimeout(e.ctx, callerDeadline)
				bound = callerDeadline + 5*time.Second
				how = "a " + callerDeadline.String() + " deadline"
			}
			defer cancel()
			t0 := time.Now()
			err := call(ctx, withDeadline)
			took := time.Since(t0)
			_, lost := lostFirst.Load(withDeadline)
			switch {
			case err == nil:
				e.Errorf("%s with %s: succeeded against a server that is down", what, how)
			case lost && errors.Is(err, padlock.ErrLost) && errors.Is(err, padlock.ErrNotHeld):
				e.Logf("%s with %s: the hold was lost before the call: %v", what, how, err)
			case !errors.Is(err, padlock.ErrUnavailable):
				e.Errorf("%s with %s: %v, want ErrUnavailable", what, how, err)
			case errors.Is(err, padlock.ErrTimeout) || errors.Is(err, padlock.ErrNotAcquired):
				e.Errorf("%s with %s: %v reads as contention, want only ErrUnavailable", what, how, err)
			}
			if took > bound {
				e.Errorf("%s with %s: took %v, more than the %v bound", what, how, took, bound)
			}
		}
		if !parallel {
			run(false)
			run(true)
			return
		}
		var wg sync.WaitGroup
		wg.Go(func() { run(false) })
		wg.Go(func() { run(true) })
		wg.Wait()
	}

	check("Unlock", true, func(ctx context.Context, withDeadline bool) error {
		lk := lk1
		if withDeadline {
			lk = lk2
		}
		if !isOpen(lk.Done()) {
			lostFirst.Store(withDeadline, true)
		}
		err := lk.Unlock(ctx)
		if isOpen(lk.Done()) {
			e.Errorf("Unlock returned %v but Done is still open", err)
		}
		return err
	})
	check("Open", false, func(ctx context.Context, _ bool) error {
		l, err := e.h.NewLocker(ctx)
		if err == nil {
			l.Close()
		}
		return err
	})
	check("TryLock", false, func(ctx context.Context, _ bool) error {
		lk, err := a.TryLock(ctx, e.name("try"))
		if err == nil {
			lk.Unlock(ctx)
		}
		return err
	})
	check("Lock", false, func(ctx context.Context, _ bool) error {
		lk, err := a.Lock(ctx, e.name("wait"))
		if err == nil {
			lk.Unlock(ctx)
		}
		return err
	})

	// The waiter: a server that is gone is an outage, within a bound of
	// the lease (its client cannot prove its queue entry alive longer).
	// The checks above may have taken longer than the bound: the waiter's
	// own return time is what is judged.
	waitBound := outageBound + 2*e.ttl
	var r result
	select {
	case r = <-waiting:
	case <-time.After(max(time.Until(stopped.Add(waitBound)), time.Second)):
		e.Fatalf("a waiter still waits %v after the server went down", time.Since(stopped).Round(time.Second))
	}
	switch took := r.at.Sub(stopped); {
	case r.err == nil:
		e.Errorf("a waiter acquired a lock from a server that is down")
	case !errors.Is(r.err, padlock.ErrUnavailable) || errors.Is(r.err, padlock.ErrTimeout):
		e.Errorf("waiter when the server went down: %v, want ErrUnavailable", r.err)
	case took > waitBound:
		e.Errorf("the waiter gave up %v after the server went down, more than the %v bound", took, waitBound)
	}

	// Back up: the releases that failed go on in the background, and
	// finish checks that nothing is left on the server.
	restart()
	// A client may take a moment to reconnect (a connection pool backs off
	// after failed dials); it must within the bound.
	deadline := time.Now().Add(outageBound)
	for {
		lk, err := a.Lock(e.ctx, e.name("after"), padlock.WithWait(outageBound))
		if err == nil {
			e.unlock(lk)
			break
		}
		if !errors.Is(err, padlock.ErrUnavailable) || time.Now().After(deadline) {
			e.Fatalf("Lock after the server came back: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // pace the retries of a reconnecting client
	}
}

// testContextDone checks that a call whose context is over before it starts
// fails with the context's error on every backend, on a free name, and
// touches nothing on the server.
func testContextDone(e *env) {
	a := e.locker()
	cancelled, cancel := context.WithCancel(e.ctx)
	cancel()
	expired, cancel2 := context.WithDeadline(e.ctx, time.Now().Add(-time.Second))
	defer cancel2()
	name := e.name("free")
	for _, c := range []struct {
		what string
		ctx  context.Context
		want error
	}{{"cancelled", cancelled, context.Canceled}, {"expired", expired, context.DeadlineExceeded}} {
		if lk, err := a.Lock(c.ctx, name); !errors.Is(err, c.want) {
			if err == nil {
				lk.Unlock(e.ctx)
			}
			e.Errorf("Lock with a %s context on a free name = %v, want %v", c.what, err, c.want)
		}
		if lk, err := a.TryLock(c.ctx, name); !errors.Is(err, c.want) {
			if err == nil {
				lk.Unlock(e.ctx)
			}
			e.Errorf("TryLock with a %s context on a free name = %v, want %v", c.what, err, c.want)
		}
	}
	if s := e.state(); len(s) != 0 {
		e.Errorf("calls with a done context left %q on the server", s)
	}
}

// testNilContext checks that a nil context is refused up front, in the
// caller's goroutine, before any state changes: the lock stays held and a
// proper Unlock still releases it.
func testNilContext(e *env) {
	a, b := e.locker(), e.locker()
	name := e.name("nil")
	lk := e.lock(a, e.ctx, name)
	var nilCtx context.Context
	for what, call := range map[string]func(){
		"Lock":    func() { a.Lock(nilCtx, e.name("other")) },
		"TryLock": func() { a.TryLock(nilCtx, e.name("other")) },
		"Unlock":  func() { lk.Unlock(nilCtx) },
	} {
		msg := panicOf(call)
		if !strings.Contains(msg, "nil Context") {
			e.Errorf("%s(nil) panicked with %q, want a message about the nil Context", what, msg)
		}
	}
	if !isOpen(lk.Done()) {
		e.Fatalf("Unlock(nil) ended the hold: %v", lk.Err())
	}
	e.notAcquirable(b, e.ctx, name)
	e.stateLen(1)
	e.unlock(lk)
	e.stateLen(0)
}

// panicOf returns what f panicked with, or "" if it did not.
func panicOf(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg, _ = r.(string)
			if msg == "" {
				msg = "non-string panic"
			}
		}
	}()
	f()
	return ""
}
