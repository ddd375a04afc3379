package conformance

import (
	"errors"
	"os"
	"time"

	"github.com/padlock-go/padlock"
)

// testHolders checks the operator's view, on backends that offer it (a
// harness whose backend does not declares FeatureHolders unsupported):
// Holders lists every client's hold with the holder's identity, and
// ForceUnlock takes a lock away so that its holder's Done closes at its
// next renewal and the next client gets a higher token, and leaves a
// record (ForcedReleases) that a release by the holder does not.
func testHolders(e *env) {
	a, b := e.locker(), e.locker()
	name := e.name("held")
	e.skipDeclared(FeatureHolders)
	if _, err := a.Holders(e.ctx, ""); errors.Is(err, padlock.ErrUnsupported) {
		e.Fatalf("the backend lists no holders (%v), and the harness does not declare %s unsupported", err, FeatureHolders)
	}
	if _, err := a.ForceUnlock(e.ctx, name); errors.Is(err, padlock.ErrUnsupported) {
		e.Fatalf("the backend cannot force a release (%v), and the harness does not declare %s unsupported", err, FeatureHolders)
	} else if !errors.Is(err, padlock.ErrNotHeld) {
		e.Errorf("ForceUnlock of a free name = %v, want ErrNotHeld", err)
	}
	before := time.Now()
	lk := e.lock(a, padlock.WithOwner(e.ctx, "alice"), name)
	res := make(chan *padlock.Lock, 1)
	go func() {
		next, err := b.Lock(e.ctx, name)
		if err != nil {
			e.Errorf("waiter: %v", err)
		}
		res <- next
	}()
	host, _ := os.Hostname()
	var h padlock.Holder
	WaitFor(e.ctx, e.T, "the holder, and the waiter behind it where the backend counts waiters", 30*time.Second, func() bool {
		hs, err := b.Holders(e.ctx, e.name(""))
		if err != nil {
			e.Fatalf("Holders: %v", err)
		}
		if len(hs) != 1 {
			return false
		}
		h = hs[0]
		return h.Waiters < 0 || !e.caps.FairFIFO || h.Waiters == 1
	})
	switch {
	case h.Name != name || h.Token != lk.Token():
		e.Errorf("holder %q with token %d, want %q with %d", h.Name, h.Token, name, lk.Token())
	case h.Owner != "alice" || h.PID != os.Getpid() || h.Host != host:
		e.Errorf("holder identity owner %q pid %d host %q, want alice, %d, %q", h.Owner, h.PID, h.Host, os.Getpid(), host)
	case !h.Since.IsZero() && (h.Since.Before(before.Add(-time.Minute)) || h.Since.After(time.Now().Add(time.Minute))):
		e.Errorf("holder since %v, acquired at %v", h.Since, before)
	case !h.Expires.IsZero() && !h.Expires.After(before):
		e.Errorf("holder expires %v, before it was acquired", h.Expires)
	}
	if hs, err := b.Holders(e.ctx, e.name("x")); err != nil || len(hs) != 0 {
		e.Errorf("Holders under another prefix = %v, %v; want none", hs, err)
	}

	forced, err := b.ForceUnlock(e.ctx, name)
	if err != nil {
		e.Fatalf("ForceUnlock: %v", err)
	}
	if forced.Token != lk.Token() {
		e.Errorf("ForceUnlock removed token %d, want %d", forced.Token, lk.Token())
	}
	// The server keeps a record of it, which tells it from a release by
	// the holder (padlock serve counts it as forced).
	isForced := func(l *padlock.Lock, id string) bool {
		fs, err := a.ForcedReleases(e.ctx, e.name(""))
		if err != nil {
			e.Fatalf("ForcedReleases: %v", err)
		}
		for _, f := range fs {
			if f.Name == l.Name() && f.Token == l.Token() && f.ID == id {
				if f.At.Before(before.Add(-time.Minute)) || f.At.After(time.Now().Add(time.Minute)) {
					e.Errorf("forced release recorded at %v, forced after %v", f.At, before)
				}
				return true
			}
		}
		return false
	}
	if !isForced(lk, forced.ID) {
		e.Errorf("no record of the forced release of token %d (ID %q) in ForcedReleases", lk.Token(), forced.ID)
	}
	if fs, err := a.ForcedReleases(e.ctx, e.name("x")); err != nil || len(fs) != 0 {
		e.Errorf("ForcedReleases under another prefix = %v, %v; want none", fs, err)
	}
	// The holder learns at its next renewal: a third of the TTL, plus
	// generous slack for a loaded machine.
	select {
	case <-lk.Done():
		if !errors.Is(lk.Err(), padlock.ErrLost) {
			e.Errorf("force-released hold: Err = %v, want ErrLost", lk.Err())
		}
	case <-time.After(2*e.ttl + 30*time.Second):
		e.Fatalf("force-released hold's Done still open")
	}
	next := <-res
	if next == nil {
		e.FailNow()
	}
	if next.Token() <= lk.Token() {
		e.Errorf("token after a force release %d, want above %d", next.Token(), lk.Token())
	}
	if err := lk.Unlock(e.ctx); err != nil && !errors.Is(err, padlock.ErrNotHeld) && !errors.Is(err, padlock.ErrLost) {
		e.Errorf("Unlock of the force-released hold = %v, want ErrNotHeld or ErrLost", err)
	}
	hs, err := b.Holders(e.ctx, name)
	if err != nil || len(hs) != 1 || hs[0].Token != next.Token() {
		e.Fatalf("Holders after the force release = %v, %v; want the next holder, token %d", hs, err, next.Token())
	}
	e.unlock(next)
	if isForced(next, hs[0].ID) {
		e.Errorf("a release by the holder (token %d) is recorded as forced", next.Token())
	}
	// The records are no holders, whatever the prefix.
	if hs, err := b.Holders(e.ctx, ""); err != nil || len(hs) != 0 {
		e.Errorf("Holders of the whole namespace after every release = %+v, %v; want none", hs, err)
	}
}
