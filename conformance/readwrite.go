package conformance

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/padlock-go/padlock"
)

// supportsReadWrite reports whether the backend offers read-write locks.
// Where it does not, it checks that RLock and TryRLock say so
// (ErrUnsupported) and leave nothing behind, and the subtest ends there.
func supportsReadWrite(e *env, l *padlock.Locker) bool {
	e.Helper()
	if e.caps.SharedLocks {
		return true
	}
	for _, try := range []func() (*padlock.Lock, error){
		func() (*padlock.Lock, error) { return l.RLock(e.ctx, e.name("u")) },
		func() (*padlock.Lock, error) { return l.TryRLock(e.ctx, e.name("u")) },
	} {
		if lk, err := try(); !errors.Is(err, padlock.ErrUnsupported) {
			if lk != nil {
				lk.Unlock(e.ctx)
			}
			e.Fatalf("RLock on a backend without SharedLocks = %v, want ErrUnsupported", err)
		}
	}
	e.stateLen(0)
	return false
}

// testReadersShare checks the rule's simple cases, without a queue: two
// readers hold a name at once; a reader keeps writers out (TryLock fails)
// and a writer keeps readers out (TryRLock fails); a reader that comes
// after the writer unlocked gets a greater token.
func testReadersShare(e *env) {
	a, b, c := e.locker(), e.locker(), e.locker()
	if !supportsReadWrite(e, a) {
		return
	}
	name := e.name("rw")
	r1, err := a.RLock(e.ctx, name)
	if err != nil {
		e.Fatalf("RLock on a free name: %v", err)
	}
	r2, err := b.TryRLock(e.ctx, name)
	if err != nil {
		e.Fatalf("TryRLock beside a reader = %v, want a second reader", err)
	}
	e.stateLen(2)
	e.notAcquirable(c, e.ctx, name) // a writer waits for readers
	e.unlock(r1)
	e.notAcquirable(c, e.ctx, name) // and for the last of them
	e.unlock(r2)

	w := e.lock(c, e.ctx, name)
	if lk, err := a.TryRLock(e.ctx, name); !errors.Is(err, padlock.ErrNotAcquired) {
		if lk != nil {
			lk.Unlock(e.ctx)
		}
		e.Fatalf("TryRLock while a writer holds = %v, want ErrNotAcquired", err)
	}
	if e.caps.MonotonicTokens && w.Token() <= max(r1.Token(), r2.Token()) {
		e.Errorf("writer's token %d is not above its readers' %d and %d", w.Token(), r1.Token(), r2.Token())
	}
	e.unlock(w)
	r3, err := b.RLock(e.ctx, name)
	if err != nil {
		e.Fatalf("RLock after the writer: %v", err)
	}
	if e.caps.MonotonicTokens && r3.Token() <= w.Token() {
		e.Errorf("reader's token %d is not above the earlier writer's %d: it does not fence the writer's writes", r3.Token(), w.Token())
	}
	e.unlock(r3)
}

// testReadWriteStress runs readers and writers on several Lockers through
// one name. Counters in the test check the rule directly: a writer is
// never inside with anyone, and every hold's token is above the token of
// every hold that had ended before it asked. Two readers at once are
// proved in ReadersShare; here, readers that overlap are counted and
// logged.
func testReadWriteStress(e *env) {
	const lockers, goroutines, rounds = 3, 4, 6
	ls := e.lockersN(lockers)
	if !supportsReadWrite(e, ls[0]) {
		return
	}
	name := e.name("s")
	var (
		readers, writers atomic.Int64
		maxReaders       atomic.Int64
		ended            atomic.Uint64 // the greatest token of a hold that has ended
		counter          atomic.Int64  // written by writers only, racily: lost updates show overlap
		wg               sync.WaitGroup
		fails            failures
		log              holdLog
	)
	fail := fails.add
	var writes atomic.Int64 // writers' critical sections that ran
	for i, l := range ls {
		for g := range goroutines {
			writer := (i*goroutines+g)%4 == 0 // a quarter of the goroutines write
			wg.Go(func() {
				for range rounds {
					before := ended.Load()
					var (
						lk  *padlock.Lock
						err error
					)
					if writer {
						lk, err = l.Lock(e.ctx, name)
					} else {
						lk, err = l.RLock(e.ctx, name)
					}
					if err != nil {
						fail(err)
						return
					}
					got := time.Now()
					if e.caps.MonotonicTokens && lk.Token() <= before {
						fail(fmt.Errorf("token %d is not above %d, the token of a hold that ended before it asked", lk.Token(), before))
					}
					if writer {
						if w := writers.Add(1); w != 1 || readers.Load() != 0 {
							fail(fmt.Errorf("a writer is inside with %d writers and %d readers", w, readers.Load()))
						}
						writes.Add(1)
						v := counter.Load()
						runtime.Gosched()
						work()
						counter.Store(v + 1)
						writers.Add(-1)
					} else {
						n := readers.Add(1)
						if writers.Load() != 0 {
							fail(errors.New("a reader is inside with a writer"))
						}
						raise(&maxReaders, n)
						time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond) // a reader's work, to let others in beside it
						readers.Add(-1)
					}
					tok := lk.Token()
					log.held(name, got, !writer, tok)
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
	log.check(e)
	// A Lock that failed (reported above) wrote nothing: no lost update.
	if got, want := counter.Load(), writes.Load(); got != want {
		e.Errorf("counter = %d after %d exclusive writes: updates were lost to overlapping holders", got, want)
	}
	e.Logf("readers inside at once: at most %d", maxReaders.Load())
}

// testQueuedWriterBlocksReaders checks writer fairness where the backend
// queues (FairFIFO): while a reader holds and a writer waits, a new
// reader waits too (TryRLock fails, RLock queues behind the writer), and
// the writer is served before it.
func testQueuedWriterBlocksReaders(e *env) {
	a, b, c, d := e.locker(), e.locker(), e.locker(), e.locker()
	if !supportsReadWrite(e, a) {
		return
	}
	if !e.caps.FairFIFO {
		e.Skip("backend does not queue (Capabilities.FairFIFO is false): writer fairness is the no-starvation rule's")
	}
	name := e.name("q")
	r1, err := a.RLock(e.ctx, name)
	if err != nil {
		e.Fatalf("RLock: %v", err)
	}
	var order []string
	var mu sync.Mutex
	var log holdLog // a reader granted beside the writer overlaps it
	served := func(who string) {
		mu.Lock()
		order = append(order, who)
		mu.Unlock()
	}
	wres := make(chan error, 1)
	go func() {
		lk, err := b.Lock(e.ctx, name)
		if err == nil {
			got := time.Now()
			served("writer")
			work()
			log.held(name, got, false, lk.Token())
			err = lk.Unlock(e.ctx)
		}
		wres <- err
	}()
	e.stateLen(2) // the reader and the queued writer
	if lk, err := d.TryRLock(e.ctx, name); !errors.Is(err, padlock.ErrNotAcquired) {
		if lk != nil {
			lk.Unlock(e.ctx)
		}
		e.Fatalf("TryRLock with a writer waiting = %v, want ErrNotAcquired: a waiting writer must block later readers", err)
	}
	rres := make(chan error, 1)
	go func() {
		lk, err := c.RLock(e.ctx, name)
		if err == nil {
			got := time.Now()
			served("reader")
			work()
			log.held(name, got, true, lk.Token())
			err = lk.Unlock(e.ctx)
		}
		rres <- err
	}()
	e.stateLen(3) // the reader waits behind the writer
	e.unlock(r1)
	for _, ch := range []chan error{wres, rres} {
		if err := <-ch; err != nil {
			e.Fatal(err)
		}
	}
	if len(order) != 2 || order[0] != "writer" {
		e.Fatalf("served in order %v; the waiting writer must come before the reader that came after it", order)
	}
	log.check(e) // and the reader after the writer had let go
}

// testReadWriteOwner checks the owner's rules: a writer may RLock under
// its write hold (one hold, one token); when it unlocks the write side
// and keeps the read side, other readers may enter and writers may not;
// an owner that holds only the read side gets ErrUpgrade from Lock and
// TryLock at once.
func testReadWriteOwner(e *env) {
	a, b := e.locker(), e.locker()
	if !supportsReadWrite(e, a) {
		return
	}
	name := e.name("o")
	job := padlock.WithOwner(e.ctx, "job")
	w := e.lock(a, job, name)
	r, err := a.RLock(job, name)
	if err != nil {
		e.Fatalf("owner's RLock under its own write hold: %v", err)
	}
	if r.Token() != w.Token() {
		e.Errorf("owner's read handle has token %d, its write hold %d: want one hold", r.Token(), w.Token())
	}
	if s := e.state(); len(s) != 1 {
		e.Errorf("a writer and its own reader keep %q on the server, want one entry", s)
	}
	if lk, err := b.TryRLock(e.ctx, name); !errors.Is(err, padlock.ErrNotAcquired) {
		if lk != nil {
			lk.Unlock(e.ctx)
		}
		e.Fatalf("another reader's TryRLock while the owner writes = %v, want ErrNotAcquired", err)
	}
	e.unlock(w) // downgrade: the owner keeps reading
	if !isOpen(r.Done()) {
		e.Fatalf("the read handle ended when the owner unlocked its write side: %v", r.Err())
	}
	other, err := b.TryRLock(e.ctx, name)
	if err != nil {
		e.Fatalf("another reader's TryRLock after the owner's downgrade = %v, want a reader beside it", err)
	}
	e.notAcquirable(b, e.ctx, name) // readers keep writers out
	for _, try := range []func() (*padlock.Lock, error){
		func() (*padlock.Lock, error) { return a.TryLock(job, name) },
		func() (*padlock.Lock, error) { return a.Lock(job, name, padlock.WithWait(time.Minute)) },
	} {
		start := time.Now()
		lk, err := try()
		if !errors.Is(err, padlock.ErrUpgrade) {
			if lk != nil {
				lk.Unlock(e.ctx)
			}
			e.Fatalf("owner holding only the read side asked for the write side: %v, want ErrUpgrade", err)
		}
		if took := time.Since(start); took > 30*time.Second {
			e.Errorf("ErrUpgrade came after %v: it must come at once, not after a wait", took)
		}
	}
	more, err := a.RLock(job, name)
	if err != nil {
		e.Fatalf("owner's second RLock: %v", err)
	}
	e.unlock(more)
	e.unlock(r)
	e.unlock(other)
	e.stateLen(0)
	lk := e.lock(b, e.ctx, name)
	e.unlock(lk)
}

// testDoneOnLostReader cuts a reader off while a writer waits: the
// reader's Done closes before the writer is granted.
func testDoneOnLostReader(e *env) {
	c := need[Cutter](e, FeatureCut)
	if !supportsReadWrite(e, e.locker()) {
		return
	}
	doneOnLossOf(e, FeatureCut, c.Cut, lossCase{
		hold: func(e *env, a *padlock.Locker, name string) *padlock.Lock {
			lk, err := a.RLock(e.ctx, name)
			if err != nil {
				e.Fatalf("RLock: %v", err)
			}
			return lk
		},
		take: mutexLoss.take,
	})
}
