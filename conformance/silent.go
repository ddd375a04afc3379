package conformance

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/padlock-go/padlock"
)

// silentOpenBound is how long Open may take against an endpoint that
// accepts connections and answers nothing: a dial timeout and a request
// (every backend's defaults are DefaultRequestTimeout long), plus slack
// for a loaded machine. Like outageBound, it is a bound against hanging,
// not a speed claim.
const silentOpenBound = 2*padlock.DefaultRequestTimeout + 10*time.Second

// closeBound is how long Close may take when nothing it sends is
// answered: DefaultCloseTimeout, plus slack for a loaded machine.
const closeBound = padlock.DefaultCloseTimeout + 10*time.Second

// testServerSilent is ServerDown with silence instead of refusal: paths
// that accept connections and swallow every byte, so no client sees an
// error, only no answer. Open on such a path (without and with a caller
// deadline), and on Lockers whose path went silent (Blackholer): TryLock,
// Lock with a wait bound, Unlock of a live hold, Close of a Locker with a
// live hold, and a Lock that was already waiting, each return
// ErrUnavailable (never ErrTimeout or ErrNotAcquired, which would read as
// contention) within the documented bounds: the dial timeout and
// DefaultRequestTimeout, DefaultCloseTimeout for Close, and for the
// waiter the request bound plus two TTLs, as in ServerDown. Where locks
// belong to a connection (SQL advisory), a release may instead find its
// hold gone with the connection another call broke: ErrNotHeld. And a
// backend may give up a silent Locker's holds before a release is
// answered (ZooKeeper, once it can no longer prove that the server keeps
// its session): each hold's Done closes with ErrLost, and a release then
// finds its hold gone (ErrNotHeld), a Close nothing left to release. The
// hold itself, watched from before the call (its sentinel), shows that:
// its Done must have closed with ErrLost (not by the call, which ends it
// without an error or with ErrClosed) by the time the call returned.
func testServerSilent(e *env) {
	so := need[SilentOpener](e, FeatureSilentOpen)
	bh := need[Blackholer](e, FeatureBlackhole)
	a, b, c, d := e.locker(), e.locker(), e.locker(), e.locker()
	held := e.name("held")
	lk := e.lock(a, e.ctx, held)         // a is not silenced: b waits behind it
	lkc := e.lock(c, e.ctx, e.name("c")) // released while c is silent
	lkd := e.lock(d, e.ctx, e.name("d")) // released by d's Close while d is silent
	// A second hold per Locker as the sentinel made Close's work on a
	// silent path twice as long, past its bound on SQL advisory under
	// load: the holds released are their own sentinels.
	sentC, sentD := newSentinel(lkc), newSentinel(lkd)
	opt, proof := waitProof()
	waiter := make(chan error, 1)
	go func() {
		lk, err := b.Lock(e.ctx, held, opt)
		if err == nil {
			lk.Unlock(e.ctx)
		}
		waiter <- err
	}()
	e.awaitWaiting(b, proof, 4) // a, c and d hold three names, b waits

	for _, l := range []*padlock.Locker{b, c, d} {
		restore, err := bh.Blackhole(e.ctx, l)
		e.injected(FeatureBlackhole, err)
		defer func() {
			if err := restore(); err != nil {
				e.Errorf("restore: %v", err)
			}
		}()
	}
	silenced := time.Now()

	// check runs one call in its own goroutine and judges its error and
	// how long it took. A release (releases) on a backend whose locks
	// belong to a connection (no DoneBeforeRegrant) may also find the
	// hold gone, ErrNotHeld, or nothing left to release: a call of the
	// same Locker on the silent path broke the connection it shared, and
	// its locks went with it.
	var wg sync.WaitGroup
	connLocks := !e.caps.DoneBeforeRegrant
	check := func(what string, bound time.Duration, releases bool, sent *sentinel, call func() error) {
		wg.Go(func() {
			start := time.Now()
			err := call()
			took := time.Since(start)
			gone := err == nil || errors.Is(err, padlock.ErrNotHeld)
			switch {
			case releases && connLocks && gone:
				e.Logf("%s: the hold's connection had failed: %v", what, err)
			case releases && gone && sent.lostBy(start.Add(took)):
				e.Logf("%s: the Locker's holds were lost first (its sentinel: %v): %v", what, sent.err, err)
			case err == nil:
				e.Errorf("%s: succeeded on a silent path", what)
			case !errors.Is(err, padlock.ErrUnavailable):
				e.Errorf("%s: %v, want ErrUnavailable", what, err)
			case errors.Is(err, padlock.ErrTimeout) || errors.Is(err, padlock.ErrNotAcquired):
				e.Errorf("%s: %v reads as contention, want only ErrUnavailable", what, err)
			}
			if took > bound {
				e.Errorf("%s: took %v on a silent path, more than the %v bound", what, took.Round(time.Millisecond), bound)
			}
			e.Logf("%s on a silent path: %v after %v", what, err, took.Round(time.Millisecond))
		})
	}
	open := func(ctx context.Context) error {
		l, err := so.OpenSilent(ctx, padlock.WithTTL(e.ttl))
		if err == nil {
			l.Close()
		}
		return err
	}
	check("Open", silentOpenBound, false, nil, func() error { return open(e.ctx) })
	check("Open with a "+callerDeadline.String()+" deadline", callerDeadline+5*time.Second, false, nil, func() error {
		ctx, cancel := context.WithTimeout(e.ctx, callerDeadline)
		defer cancel()
		return open(ctx)
	})
	check("TryLock", outageBound, false, nil, func() error {
		lk, err := c.TryLock(e.ctx, e.name("try"))
		if err == nil {
			lk.Unlock(e.ctx)
		}
		return err
	})
	check("Lock with a wait bound", outageBound, false, nil, func() error {
		lk, err := c.Lock(e.ctx, e.name("wait"), padlock.WithWait(2*time.Minute))
		if err == nil {
			lk.Unlock(e.ctx)
		}
		return err
	})
	check("Unlock", outageBound, true, sentC, func() error {
		err := lkc.Unlock(e.ctx)
		if isOpen(lkc.Done()) {
			e.Errorf("Unlock on a silent path returned %v but Done is still open", err)
		}
		return err
	})
	check("Close of a Locker with a live hold", closeBound, true, sentD, func() error {
		err := d.Close()
		if isOpen(lkd.Done()) {
			e.Errorf("Close on a silent path returned %v but its hold's Done is still open", err)
		}
		return err
	})
	waitBound := outageBound + 2*e.ttl
	check("a Lock waiting when its path went silent", waitBound, false, nil, func() error {
		select {
		case err := <-waiter:
			return err
		case <-time.After(max(time.Until(silenced.Add(waitBound)), time.Second) + 10*time.Second):
			e.Log(stacks())
			return errors.New("still waiting")
		}
	})
	wg.Wait()
	e.unlock(lk)
}

// sentinel watches a hold for its loss, from before a call that releases
// it: whether the hold was lost (ErrLost) before the call, rather than
// ended by it.
type sentinel struct {
	lk     *padlock.Lock
	closed chan struct{} // closed when lk's Done closed, after at and err are set
	at     time.Time     // when Done closed, as seen by the watcher
	err    error         // lk.Err() then
}

func newSentinel(lk *padlock.Lock) *sentinel {
	s := &sentinel{lk: lk, closed: make(chan struct{})}
	go func() {
		<-lk.Done()
		s.at, s.err = time.Now(), lk.Err()
		close(s.closed)
	}()
	return s
}

// sentinelSlack is how much later than a call's return its sentinel may
// be seen lost and still count as lost first: the backend ends all of a
// session's holds in one step, but each Done is closed on a goroutine of
// its own, which a loaded machine may run late.
const sentinelSlack = time.Second

// lostBy reports whether the sentinel's hold was lost (Done closed with
// ErrLost) no later than returned, allowing sentinelSlack; it waits up to
// that slack for the loss to show.
func (s *sentinel) lostBy(returned time.Time) bool {
	if s == nil {
		return false
	}
	select {
	case <-s.closed:
	case <-time.After(time.Until(returned.Add(sentinelSlack))):
		return false
	}
	return errors.Is(s.err, padlock.ErrLost) && !s.at.After(returned.Add(sentinelSlack))
}
