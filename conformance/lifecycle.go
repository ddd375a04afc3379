package conformance

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"time"

	"github.com/padlock-go/padlock"
)

// testInputErrors checks that invalid names and options are refused with
// their sentinel errors, and touch nothing on the server.
func testInputErrors(e *env) {
	a := e.locker()
	for _, name := range []string{"", strings.Repeat("x", padlock.MaxNameLen+1), "bad\xffutf8", "nul\x00byte"} {
		if _, err := a.Lock(e.ctx, name); !errors.Is(err, padlock.ErrInvalidName) {
			e.Errorf("Lock(%q) = %v, want ErrInvalidName", name, err)
		}
		if _, err := a.TryLock(e.ctx, name); !errors.Is(err, padlock.ErrInvalidName) {
			e.Errorf("TryLock(%q) = %v, want ErrInvalidName", name, err)
		}
	}
	// The longest valid name, with characters that need escaping, works.
	long := strings.Repeat("{/%é}", padlock.MaxNameLen/6)
	lk := e.lock(a, e.ctx, long)
	e.unlock(lk)
	for _, opt := range []padlock.Option{padlock.WithTTL(time.Millisecond), padlock.WithWait(-time.Second), padlock.WithRetry(nil), nil} {
		if _, err := a.Lock(e.ctx, e.name("o"), opt); !errors.Is(err, padlock.ErrInvalidOption) {
			e.Errorf("Lock with a bad option = %v, want ErrInvalidOption", err)
		}
	}
	if s := e.state(); len(s) != 0 {
		e.Errorf("refused calls left %q on the server", s)
	}
}

// testClosedLocker checks Close: it releases what is held (Err becomes
// ErrClosed), aborts waiters, and later calls fail with ErrClosed. One
// waiter waits behind another Locker's hold, and is shown to be waiting
// before Close (see awaitWaiting); a second waits behind its own Locker's
// hold (shown to wait only where the backend queues).
func testClosedLocker(e *env) {
	a, b := e.locker(), e.locker()
	name, other := e.name("c"), e.name("o")
	lk := e.lock(a, e.ctx, name)
	lkb := e.lock(b, e.ctx, other)
	res := make(chan error, 2)
	opt, proof := waitProof()
	go func() {
		_, err := a.Lock(e.ctx, other, opt) // waits behind b's hold
		res <- err
	}()
	e.awaitWaiting(a, proof, 3) // Close must abort a waiting call, not one yet to start
	go func() {
		_, err := a.Lock(e.ctx, name) // waits behind lk, same Locker
		res <- err
	}()
	if e.caps.FairFIFO {
		e.stateLen(4)
	}
	if err := a.Close(); err != nil {
		e.Fatalf("Close: %v", err)
	}
	for range 2 {
		if err := <-res; !errors.Is(err, padlock.ErrClosed) {
			e.Errorf("waiter during Close = %v, want ErrClosed", err)
		}
	}
	if isOpen(lk.Done()) || !errors.Is(lk.Err(), padlock.ErrClosed) {
		e.Errorf("hold after Close: Err = %v, want Done closed with ErrClosed", lk.Err())
	}
	if _, err := a.Lock(e.ctx, name); !errors.Is(err, padlock.ErrClosed) {
		e.Errorf("Lock on a closed Locker = %v, want ErrClosed", err)
	}
	if _, err := a.TryLock(e.ctx, name); !errors.Is(err, padlock.ErrClosed) {
		e.Errorf("TryLock on a closed Locker = %v, want ErrClosed", err)
	}
	if err := a.Close(); err != nil {
		e.Errorf("second Close = %v, want nil", err)
	}
	e.stateLen(1) // b's hold, and nothing of a's
	e.unlock(lkb)
	lk2, err := b.TryLock(e.ctx, name)
	if err != nil {
		e.Fatalf("TryLock after the holder's Locker closed: %v", err)
	}
	e.unlock(lk2)
}

// testNoLeaks runs a mixed workload and closes every Locker without
// unlocking: the server must hold nothing afterwards (checked here and by
// Run, which also checks goroutines with goleak).
func testNoLeaks(e *env) {
	a, b, c := e.locker(), e.locker(), e.locker()
	owner := padlock.WithOwner(e.ctx, "leaky")
	e.lock(a, e.ctx, e.name("1"))
	e.lock(a, owner, e.name("2"))
	e.lock(a, owner, e.name("2"))
	e.lock(b, e.ctx, e.name("3"))
	e.notAcquirable(c, e.ctx, e.name("1"))
	if _, err := c.Lock(e.ctx, e.name("3"), padlock.WithWait(100*time.Millisecond)); !errors.Is(err, padlock.ErrTimeout) {
		e.Fatalf("bounded wait = %v, want ErrTimeout", err)
	}
	// A Locker that has not waited yet, shown waiting before its cancel.
	d := e.locker()
	wctx, cancel := context.WithCancel(e.ctx)
	res := make(chan error, 1)
	opt, proof := waitProof()
	go func() { _, err := d.Lock(wctx, e.name("1"), opt); res <- err }()
	e.awaitWaiting(d, proof, 4)
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		e.Fatalf("cancelled wait = %v, want context.Canceled", err)
	}
	for _, l := range []*padlock.Locker{a, b, c, d} {
		if err := l.Close(); err != nil {
			e.Errorf("Close: %v", err)
		}
	}
	if s := e.state(); len(s) != 0 {
		e.Errorf("after Close the server still holds %q", s)
	}
}

// Holds on one Locker, taken and released again and again, must leave
// nothing behind in the process either: holdCycles of Lock and Unlock,
// twice, may each grow the live heap by at most holdGrowth a cycle, on the
// smaller of the two rounds (a leak grows both; a cache filling or a
// buffer kept grows one). A hold's watch on an advisory session's loss
// notice, left registered by Unlock, kept about 1.1 KB a cycle there for
// the session's life.
const (
	holdCycles = 300
	holdGrowth = 256 // bytes a cycle
)

// testNoGrowthPerHold checks that a Locker's memory stays flat over many
// holds of one name.
func testNoGrowthPerHold(e *env) {
	a := e.locker()
	name := e.name("g")
	cycles := func(n int) {
		for range n {
			e.unlock(e.lock(a, e.ctx, name))
		}
	}
	cycles(holdCycles / 4) // connections, prepared statements, scripts
	grew := make([]float64, 2)
	before := liveHeap()
	for i := range grew {
		cycles(holdCycles)
		after := liveHeap()
		grew[i] = float64(int64(after)-int64(before)) / holdCycles
		before = after
	}
	e.Logf("live heap growth a cycle: %.0f B, then %.0f B", grew[0], grew[1])
	if least := min(grew[0], grew[1]); least > holdGrowth {
		e.Errorf("the live heap grew by %.0f B and %.0f B a Lock and Unlock in two rounds of %d; at most %d B allowed",
			grew[0], grew[1], holdCycles, holdGrowth)
	}
}

// liveHeap is the process's live heap after a full garbage collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// testNameMapping holds, at once, names that a naive mapping onto a
// backend's keyspace would merge: a name and its "child", a name and its
// escaped spelling, hash-tag braces. Each must be its own lock.
func testNameMapping(e *env) {
	a, b := e.locker(), e.locker()
	base := e.name("m")
	names := []string{base, base + "/child", base + "%2Fchild", base + "{tag}", base + "%7Btag%7D",
		base + "}{", base + " ", base + "é", base + "\t", base + "😀", base + "\u007f", base + "/.", base + "/.."}
	var held []*padlock.Lock
	for _, n := range names {
		lk, err := a.TryLock(e.ctx, n)
		if err != nil {
			e.Fatalf("TryLock(%q) while holding %d other names: %v (two names share a key?)", n, len(held), err)
		}
		held = append(held, lk)
	}
	for _, lk := range held {
		e.notAcquirable(b, e.ctx, lk.Name())
	}
	e.stateLen(len(names))
	for _, lk := range held {
		e.unlock(lk)
	}
}
