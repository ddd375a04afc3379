package conformance

import (
	"context"
	"errors"
	"time"

	"github.com/padlock-go/padlock"
)

// watchWithin bounds each wait for a signal of WatchHolders: generous,
// for a loaded machine; a signal that never comes fails the test.
const watchWithin = 30 * time.Second

// testWatchHolders checks Locker.WatchHolders where the backend pushes
// changes of holders (elsewhere it says ErrUnsupported, and an inspector
// polls Holders): its first signal comes once the watch is up; after it,
// a grant, a waiter joining, a hand-off and a release under the prefix
// each bring a signal, after which Holders shows the change; the channel
// closes when its context ends, and when the Locker closes.
func testWatchHolders(e *env) {
	w, a, b := e.locker(), e.locker(), e.locker()
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	ch, err := w.WatchHolders(ctx, e.name(""))
	if errors.Is(err, padlock.ErrUnsupported) {
		e.Skipf("backend does not push changes of holders: inspectors poll Holders (%v)", err)
	}
	if err != nil {
		e.Fatalf("WatchHolders: %v", err)
	}
	seen := func(what string, ok func([]padlock.Holder) bool) {
		e.Helper()
		SeenHolders(e.ctx, e, ch, w, e.name(""), what, watchWithin, ok)
	}
	drain := func() { Drain(ch) }
	Signal(e, ch, "the watch is up", watchWithin)
	name := e.name("w")
	drain()
	lk := e.lock(a, e.ctx, name)
	seen("a grant", func(hs []padlock.Holder) bool { return len(hs) == 1 && hs[0].Token == lk.Token() })
	res := make(chan *padlock.Lock, 1)
	drain()
	go func() {
		next, err := b.Lock(e.ctx, name)
		if err != nil {
			e.Errorf("waiter: %v", err)
		}
		res <- next
	}()
	if e.caps.FairFIFO {
		// A queued waiter is an entry on the server: its arrival is a
		// change too.
		seen("a waiter joining", func(hs []padlock.Holder) bool { return len(hs) == 1 && hs[0].Waiters == 1 })
	}
	drain()
	e.unlock(lk)
	next := <-res
	if next == nil {
		e.FailNow()
	}
	seen("a hand-off", func(hs []padlock.Holder) bool { return len(hs) == 1 && hs[0].Token == next.Token() })
	drain()
	e.unlock(next)
	seen("a release", func(hs []padlock.Holder) bool { return len(hs) == 0 })
	cancel()
	Closed(e, ch, "its context's end", watchWithin)
	ch2, err := w.WatchHolders(e.ctx, e.name(""))
	if err != nil {
		e.Fatalf("WatchHolders: %v", err)
	}
	if err := w.Close(); err != nil {
		e.Fatalf("Close: %v", err)
	}
	Closed(e, ch2, "the Locker's Close", watchWithin)
	if _, err := w.WatchHolders(e.ctx, e.name("")); !errors.Is(err, padlock.ErrClosed) {
		e.Errorf("WatchHolders on a closed Locker = %v, want ErrClosed", err)
	}
}
