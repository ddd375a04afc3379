package zookeeper_test

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
)

// result is what a Lock or RLock run in the background returned.
type result struct {
	lk  *padlock.Lock
	err error
}

func background(f func() (*padlock.Lock, error)) <-chan result {
	ch := make(chan result, 1)
	go func() {
		lk, err := f()
		ch <- result{lk, err}
	}()
	return ch
}

func await(t *testing.T, what string, ch <-chan result) *padlock.Lock {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: %v", what, r.err)
		}
		return r.lk
	case <-time.After(time.Minute):
		t.Fatalf("%s: not granted within a minute", what)
	}
	return nil
}

// A downgrade keeps the writer's place: when the owner's writer turns into
// a reader (Share), the reader queued before the next writer enters, and
// the writer and the readers queued behind it still wait; they get the
// name in their order after.
func TestShareKeepsPlace(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h := newHarness(t, single, "")
	t.Cleanup(func() { h.Close() })
	a, r1l, bl, r2l, probe := h.open(t, ctx), h.open(t, ctx), h.open(t, ctx), h.open(t, ctx), h.open(t, ctx)
	const name = "downgrade"
	job := padlock.WithOwner(ctx, "job")
	w := must(t)(a.Lock(job, name))
	r := must(t)(a.RLock(job, name))
	r1 := background(func() (*padlock.Lock, error) { return r1l.RLock(ctx, name) })
	conformance.WaitState(ctx, t, h, "the writer and a queued reader", 30*time.Second, func(s []string) bool { return len(s) == 2 })
	b := background(func() (*padlock.Lock, error) { return bl.Lock(ctx, name) })
	conformance.WaitState(ctx, t, h, "and a queued writer", 30*time.Second, func(s []string) bool { return len(s) == 3 })
	r2 := background(func() (*padlock.Lock, error) { return r2l.RLock(ctx, name) })
	conformance.WaitState(ctx, t, h, "and a reader behind it", 30*time.Second, func(s []string) bool { return len(s) == 4 })

	if err := w.Unlock(ctx); err != nil { // the owner keeps reading: Share
		t.Fatal(err)
	}
	first := await(t, "the reader queued before the writer, after the downgrade", r1)
	if first.Token() <= r.Token() {
		t.Errorf("the reader's token %d is not above the downgraded writer's %d", first.Token(), r.Token())
	}
	hs, err := probe.Holders(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 2 || hs[0].Token != r.Token() || hs[0].Mode != padlock.Shared || hs[1].Mode != padlock.Shared || hs[0].Waiters != 2 {
		t.Fatalf("holders after the downgrade = %+v; want the downgraded writer (token %d) and the reader, shared, with 2 waiting", hs, r.Token())
	}
	// Both readers hold, so the queued writer cannot have been granted,
	// nor the reader behind it.
	for what, ch := range map[string]<-chan result{"the queued writer": b, "the reader behind it": r2} {
		select {
		case got := <-ch:
			t.Fatalf("%s was granted beside the downgraded reader: %v", what, got.err)
		default:
		}
	}
	if lk, err := probe.TryRLock(ctx, name); !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("a new reader's TryRLock behind the queued writer = %v, %v; want ErrNotAcquired", lk, err)
	}
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	writer := await(t, "the queued writer", b)
	select {
	case got := <-r2:
		t.Fatalf("the reader behind the writer was granted beside it: %v", got.err)
	default:
	}
	if err := writer.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	last := await(t, "the last reader", r2)
	if last.Token() <= writer.Token() {
		t.Errorf("the last reader's token %d is not above the writer's %d", last.Token(), writer.Token())
	}
	if err := last.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	conformance.WaitState(ctx, t, h, "nothing left", 30*time.Second, func(s []string) bool { return len(s) == 0 })
}

// Curator's downgrade, done by hand on the same queue: take a read node
// while holding the writer (Curator's reader predicate lets its own
// writer's thread in), then release the writer. The read node is made
// behind the writer already queued, which then is the lowest node and is
// granted while the downgrading owner still counts itself a reader: the
// hazard that Share, which keeps the writer's node and place, avoids
// (TestShareKeepsPlace). padlock's own rule makes that read node a waiter
// behind the writer, not a hold: Holders does not list it.
func TestCuratorDowngradeLetsWriterIn(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h := newHarness(t, single, "")
	t.Cleanup(func() { h.Close() })
	a, bl := h.open(t, ctx), h.open(t, ctx)
	const name = "curator-downgrade"
	w := must(t)(a.Lock(ctx, name))
	b := background(func() (*padlock.Lock, error) { return bl.Lock(ctx, name) })
	s := conformance.WaitState(ctx, t, h, "the writer and a queued writer", 30*time.Second, func(s []string) bool { return len(s) == 2 })
	read, err := h.inspect.Create(path.Dir(s[0])+"/_c_0123456789abcdef0123456789abcdef-read-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	defer h.inspect.Delete(read, -1)
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	writer := await(t, "the queued writer, after Curator's downgrade", b)
	defer writer.Unlock(ctx)
	if ok, _, err := h.inspect.Exists(read); err != nil || !ok {
		t.Fatalf("the downgrade's read node: exists %v, %v", ok, err)
	}
	t.Logf("Curator's sequence: writer %d granted while the downgrade's read node %s exists", writer.Token(), path.Base(read))
	hs, err := a.Holders(ctx, name)
	if err != nil || len(hs) != 1 || hs[0].Token != writer.Token() || hs[0].Mode != padlock.Exclusive || hs[0].Waiters != 1 {
		t.Fatalf("holders = %+v, %v; want the writer alone, the read node waiting behind it", hs, err)
	}
}

// A writer turned reader (Share) still learns at once that its node was
// deleted: the data change fired the watch that reports the deletion, so
// the hold sets it again. ForceUnlock then closes the reader's Done.
func TestSharedWriterForceUnlocked(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h := newHarness(t, single, "")
	t.Cleanup(func() { h.Close() })
	a, b := h.open(t, ctx), h.open(t, ctx)
	const name = "shared-forced"
	job := padlock.WithOwner(ctx, "job")
	w := must(t)(a.Lock(job, name))
	r := must(t)(a.RLock(job, name))
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	other := must(t)(b.TryRLock(ctx, name)) // the Share is on the server
	forced, err := b.ForceUnlock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if forced.Token != r.Token() {
		t.Errorf("ForceUnlock returned token %d, want the oldest hold's %d", forced.Token, r.Token())
	}
	for what, lk := range map[string]*padlock.Lock{"the downgraded writer": r, "the other reader": other} {
		forcedOut(t, h, what, lk)
	}
	conformance.WaitState(ctx, t, h, "nothing left", 30*time.Second, func(s []string) bool { return len(s) == 0 })
}

// Holders lists one entry per reader and per permit, with its mode and
// limit; ForceUnlock takes every one of them away and records each.
func TestHoldersOfReadersAndPermits(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h := newHarness(t, single, "")
	t.Cleanup(func() { h.Close() })
	ls := []*padlock.Locker{h.open(t, ctx), h.open(t, ctx), h.open(t, ctx)}
	for _, c := range []struct {
		name string
		take func(l *padlock.Locker) (*padlock.Lock, error)
		mode padlock.Mode
		lim  int
	}{
		{"readers", func(l *padlock.Locker) (*padlock.Lock, error) { return l.RLock(ctx, "readers") }, padlock.Shared, 1},
		{"permits", func(l *padlock.Locker) (*padlock.Lock, error) { return l.Lock(ctx, "permits", padlock.WithLimit(3)) }, padlock.Exclusive, 3},
	} {
		var held []*padlock.Lock
		for _, l := range ls[:2] {
			held = append(held, must(t)(c.take(l)))
		}
		waiter := background(func() (*padlock.Lock, error) { return ls[2].Lock(ctx, c.name, padlock.WithLimit(c.lim)) })
		if c.lim > 1 {
			held = append(held, await(t, "the third permit", waiter))
		} else {
			conformance.WaitState(ctx, t, h, "two readers and a writer queued", 30*time.Second, func(s []string) bool {
				return len(slices.DeleteFunc(s, func(p string) bool { return !strings.Contains(p, c.name) })) == 3
			})
		}
		hs, err := ls[0].Holders(ctx, c.name)
		if err != nil {
			t.Fatal(err)
		}
		if len(hs) != len(held) {
			t.Fatalf("%s: holders = %+v, want %d", c.name, hs, len(held))
		}
		for i, hd := range hs {
			if hd.Token != held[i].Token() || hd.Mode != c.mode || hd.Limit != c.lim {
				t.Errorf("%s: holder %d = %+v, want token %d, %v, limit %d", c.name, i, hd, held[i].Token(), c.mode, c.lim)
			}
		}
		if _, err := ls[0].ForceUnlock(ctx, c.name); err != nil {
			t.Fatal(err)
		}
		for _, lk := range held {
			select {
			case <-lk.Done():
			case <-time.After(2*h.TTL() + 30*time.Second):
				t.Fatalf("%s: hold %d's Done still open after ForceUnlock", c.name, lk.Token())
			}
		}
		fs, err := ls[0].ForcedReleases(ctx, c.name)
		if err != nil {
			t.Fatal(err)
		}
		for _, lk := range held {
			if !slices.ContainsFunc(fs, func(f padlock.ForcedRelease) bool { return f.Token == lk.Token() }) {
				t.Errorf("%s: no record of the forced release of token %d in %+v", c.name, lk.Token(), fs)
			}
		}
		if c.lim == 1 {
			lk := await(t, "the queued writer, after the readers were forced out", waiter)
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	conformance.WaitState(ctx, t, h, "nothing left", 30*time.Second, func(s []string) bool { return len(s) == 0 })
}

// must(t)(l.Lock(...)) is the lock, or the test's end.
func must(t *testing.T) func(*padlock.Lock, error) *padlock.Lock {
	return func(lk *padlock.Lock, err error) *padlock.Lock {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return lk
	}
}

// A Share whose answer is lost: the server applied it, the client cannot
// tell. The owner's Unlock of its write side says so (ErrUnavailable) and
// keeps the read side; the hold then works in the state the server has:
// another reader enters beside it and a writer does not, its Unlock
// releases it and leaves nothing, and (second round) a forced release
// still reaches it and closes its Done.
func TestShareAnswerLost(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h := newHarness(t, single, "")
	t.Cleanup(func() { h.Close() })
	b := h.open(t, ctx)
	for _, end := range []string{"unlock", "force"} {
		name := "share-lost-" + end
		// The session must outlive the silence (its timeout is the
		// servers' longest, 2s): on a loaded machine it may not, and
		// then the round is tried again.
		var r *padlock.Lock
		for try := 0; r == nil; try++ {
			if try == 3 {
				t.Fatal("the session lapsed in each of three tries while the answers were dropped")
			}
			r = shareAnswerLost(t, ctx, h, name)
		}
		other := must(t)(b.TryRLock(ctx, name))
		if lk, err := b.TryLock(ctx, name); !errors.Is(err, padlock.ErrNotAcquired) {
			t.Fatalf("%s: a writer's TryLock beside two readers = %v, %v; want ErrNotAcquired", end, lk, err)
		}
		switch end {
		case "unlock":
			if err := r.Unlock(ctx); err != nil {
				t.Fatalf("Unlock of the read side after the lost Share: %v", err)
			}
		case "force":
			if _, err := b.ForceUnlock(ctx, name); err != nil {
				t.Fatal(err)
			}
			select {
			case <-r.Done():
			case <-time.After(2*h.TTL() + 30*time.Second):
				t.Fatal("after the lost Share, a forced release never reached the hold: Done still open")
			}
		}
		other.Unlock(ctx)
		conformance.WaitState(ctx, t, h, "nothing left", 30*time.Second, func(s []string) bool { return len(s) == 0 })
	}
}

// shareAnswerLost has an owner take the write and read sides of name and
// unlock the write side while its answers are dropped, and returns the
// read handle, or nil if the session lapsed meanwhile.
func shareAnswerLost(t *testing.T, ctx context.Context, h *harness, name string) *padlock.Lock {
	t.Helper()
	a := h.open(t, ctx)
	job := padlock.WithOwner(ctx, "job")
	w := must(t)(a.Lock(job, name))
	r := must(t)(a.RLock(job, name))
	s := conformance.WaitState(ctx, t, h, "the writer", 30*time.Second, func(s []string) bool { return len(s) == 1 })
	heal, err := h.proxies.Of(a)[0].DropAnswers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() { res <- w.Unlock(ctx) }()
	conformance.WaitFor(ctx, t, "the node marked shared on the server", 30*time.Second, func() bool {
		data, _, err := h.inspect.Get(s[0])
		return err == nil && strings.Contains(string(data), `"mode":"shared"`)
	})
	if err := heal(); err != nil {
		t.Fatal(err)
	}
	if err := <-res; !errors.Is(err, padlock.ErrUnavailable) {
		t.Fatalf("Unlock of the write side whose Share answer was lost = %v, want ErrUnavailable", err)
	}
	if !isOpen(r.Done()) {
		t.Logf("the session lapsed while the answers were dropped (%v): again", r.Err())
		a.Close()
		conformance.WaitState(ctx, t, h, "nothing left", 30*time.Second, func(s []string) bool { return len(s) == 0 })
		return nil
	}
	return r
}

// A reader's or a permit's create whose answer is lost leaves no orphan
// and no second entry, as a writer's (TestCreateAnswerLost): the client
// finds its own node again by the protected create's id, whatever the
// node's kind.
func TestReaderAndPermitCreateAnswerLost(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h := newHarness(t, single, "")
	t.Cleanup(func() { h.Close() })
	for _, c := range []struct {
		name  string
		holds int                                            // how many holds fill the name
		hold  func(l *padlock.Locker) (*padlock.Lock, error) // one of them
		take  func(l *padlock.Locker) (*padlock.Lock, error)
		label string // in the name of the node take makes
	}{
		{"reader", 1,
			func(l *padlock.Locker) (*padlock.Lock, error) { return l.Lock(ctx, "lost-reader") },
			func(l *padlock.Locker) (*padlock.Lock, error) {
				return l.RLock(ctx, "lost-reader", padlock.WithWait(time.Minute))
			}, "-read-"},
		{"permit", 2,
			func(l *padlock.Locker) (*padlock.Lock, error) {
				return l.Lock(ctx, "lost-permit", padlock.WithLimit(2))
			},
			func(l *padlock.Locker) (*padlock.Lock, error) {
				return l.Lock(ctx, "lost-permit", padlock.WithLimit(2), padlock.WithWait(time.Minute))
			}, "-permit-2-"},
	} {
		l := h.open(t, ctx)
		warm := must(t)(l.RLock(ctx, "warm")) // the session exists
		if err := warm.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		// Holders keep the name's parent there when the create arrives,
		// and make it wait.
		var holders []*padlock.Lock
		for range c.holds {
			holders = append(holders, must(t)(c.hold(h.open(t, ctx))))
		}
		conformance.WaitState(ctx, t, h, "the holders alone", 30*time.Second, func(s []string) bool { return len(s) == len(holders) })
		heal, err := h.proxies.Of(l)[0].DropAnswers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		res := background(func() (*padlock.Lock, error) { return c.take(l) })
		conformance.WaitState(ctx, t, h, "the node created behind the dropped answer", 30*time.Second, func(s []string) bool { return len(s) == len(holders)+1 })
		if err := heal(); err != nil {
			t.Fatal(err)
		}
		for _, hd := range holders {
			if err := hd.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		lk := await(t, c.name+" after its create's answer was lost", res)
		s := conformance.WaitState(ctx, t, h, "one entry", 30*time.Second, func(s []string) bool { return len(s) >= 1 })
		if len(s) != 1 || !strings.Contains(s[0], c.label) {
			t.Errorf("%s: after the lost answer the queue holds %q: an orphan or a second entry", c.name, s)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		conformance.WaitState(ctx, t, h, "nothing left", 30*time.Second, func(s []string) bool { return len(s) == 0 })
	}
}

// A hold granted on its first look is watched through its name's node (a
// children watch; the look reads nothing of its own node): a ForceUnlock
// of the hold alone closes its Done. When another client queues behind it,
// that watch's event makes the hold watch its own node, and a ForceUnlock
// after that still closes its Done. Without either, nothing would: the
// renewal of a ZooKeeper hold sends no request.
func TestForceUnlockReachesHoldWatchedThroughParent(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h := newHarness(t, single, "")
	t.Cleanup(func() { h.Close() })
	a, b, op := h.open(t, ctx), h.open(t, ctx), h.open(t, ctx)

	alone := must(t)(a.Lock(ctx, "alone"))
	if _, err := op.ForceUnlock(ctx, "alone"); err != nil {
		t.Fatal(err)
	}
	forcedOut(t, h, "a hold alone", alone)

	first := must(t)(a.Lock(ctx, "queued"))
	waiter := background(func() (*padlock.Lock, error) { return b.Lock(ctx, "queued") })
	conformance.WaitState(ctx, t, h, "a waiter queued behind the hold", 30*time.Second, func(s []string) bool {
		return len(slices.DeleteFunc(s, func(p string) bool { return !strings.Contains(p, "queued") })) == 2
	})
	if _, err := op.ForceUnlock(ctx, "queued"); err != nil {
		t.Fatal(err)
	}
	forcedOut(t, h, "a hold with a waiter queued behind it", first)
	next := await(t, "the waiter, after the forced release", waiter)
	if next.Token() <= first.Token() {
		t.Errorf("the waiter's token %d, not above the forced hold's %d", next.Token(), first.Token())
	}
	if err := next.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	conformance.WaitState(ctx, t, h, "nothing left", 30*time.Second, func(s []string) bool { return len(s) == 0 })
}

// A hold watched through its name's node whose client is cut off while an
// operator force-deletes its node: when it reconnects, its Done closes,
// whether the name's node (a container) is still there, kept by the next
// holder, or was removed meanwhile as empty, which the watch set again on
// reconnecting reports as that node's deletion, not a change of its
// children.
func TestForceUnlockWhileCutOff(t *testing.T) {
	needServers(t)
	for _, keepParent := range []bool{true, false} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		h := newHarness(t, single, "")
		t.Cleanup(func() { h.Close() })
		// A session long enough to outlive the cut.
		a := conformance.NewLocker(ctx, t, h, padlock.WithTTL(20*time.Second))
		b := h.open(t, ctx)
		const name = "cut-forced"
		lk := must(t)(a.Lock(ctx, name))
		heal := h.proxies.Cut(a)
		if _, err := b.ForceUnlock(ctx, name); err != nil {
			t.Fatal(err)
		}
		var next *padlock.Lock
		if keepParent {
			next = must(t)(b.Lock(ctx, name))
		} else {
			// The server removes an empty container within its check
			// interval (half a second on the test servers).
			conformance.WaitFor(ctx, t, "the name's empty node removed", 30*time.Second, func() bool {
				kids, _, err := h.inspect.Children(h.root)
				return err == nil && !slices.ContainsFunc(kids, func(k string) bool { return k != "forced" })
			})
		}
		if err := heal(); err != nil {
			t.Fatal(err)
		}
		forcedOut(t, h, fmt.Sprintf("keep parent %v, after reconnecting", keepParent), lk)
		if next != nil {
			if err := next.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// forcedOut fails t unless lk's Done closes with ErrLost, its node having
// been force-deleted, within two TTLs and a generous margin: a hold whose
// deletion never reached it stays open for ever, as a ZooKeeper hold's
// renewal sends no request.
func forcedOut(t *testing.T, h *harness, what string, lk *padlock.Lock) {
	t.Helper()
	select {
	case <-lk.Done():
		if !errors.Is(lk.Err(), padlock.ErrLost) {
			t.Errorf("%s: Err = %v, want ErrLost", what, lk.Err())
		}
	case <-time.After(2*h.TTL() + 30*time.Second):
		t.Fatalf("%s: Done still open after its node was force-deleted", what)
	}
}
