package etcd_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/padlocktest"
)

// Readers, permits and writers share one queue of keys per name (issue
// 25): these tests look at what the conformance suite cannot see, the keys
// on the server.

// must returns a function that returns lk, failing the test on err:
// must(t)(l.Lock(ctx, name)).
func must(t *testing.T) func(lk *padlock.Lock, err error) *padlock.Lock {
	return func(lk *padlock.Lock, err error) *padlock.Lock {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return lk
	}
}

// lockLater runs lock in a goroutine and returns where its outcome comes.
func lockLater(lock func() (*padlock.Lock, error)) <-chan *padlock.Lock {
	ch := make(chan *padlock.Lock, 1)
	go func() {
		lk, err := lock()
		if err != nil {
			lk = nil
		}
		ch <- lk
	}()
	return ch
}

// Holders reports one entry per reader and per permit, with its mode and
// limit and the waiters behind; ForceUnlock removes every one of them, records
// each, and the waiting writer gets the name.
func TestRecipeHoldersAndForceUnlock(t *testing.T) {
	h, ctx := etcdTest(t)
	a, b, c := conformance.NewLocker(ctx, t, h), conformance.NewLocker(ctx, t, h), conformance.NewLocker(ctx, t, h)

	r1 := must(t)(a.RLock(ctx, "rw"))
	r2 := must(t)(b.RLock(ctx, "rw"))
	writer := lockLater(func() (*padlock.Lock, error) { return c.Lock(ctx, "rw") })
	waitKeys(t, ctx, h, 3)
	hs, err := a.Holders(ctx, "rw")
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 2 {
		t.Fatalf("Holders = %+v, want the two readers", hs)
	}
	for i, lk := range []*padlock.Lock{r1, r2} {
		if got := hs[i]; got.Token != lk.Token() || got.Mode != backends.Shared || got.Limit != 1 || got.Waiters != 1 {
			t.Errorf("holder %d = token %d, %v, limit %d, %d waiting; want token %d, shared, limit 1, 1 waiting",
				i, got.Token, got.Mode, got.Limit, got.Waiters, lk.Token())
		}
	}
	forced, err := a.ForceUnlock(ctx, "rw")
	if err != nil {
		t.Fatal(err)
	}
	if forced.Token != r1.Token() {
		t.Errorf("ForceUnlock returned token %d, want the oldest reader's %d", forced.Token, r1.Token())
	}
	var w *padlock.Lock
	select {
	case w = <-writer:
	case <-ctx.Done():
		t.Fatal("the waiting writer was not granted after its readers were force-released")
	}
	if w == nil {
		t.Fatal("the waiting writer failed")
	}
	for _, r := range []*padlock.Lock{r1, r2} {
		select {
		case <-r.Done(): // at its next renewal
		case <-ctx.Done():
			t.Fatal("a force-released reader's Done stayed open")
		}
		if !errors.Is(r.Err(), padlock.ErrLost) {
			t.Errorf("force-released reader: Err = %v, want ErrLost", r.Err())
		}
	}
	recs, err := a.ForcedReleases(ctx, "rw")
	if err != nil {
		t.Fatal(err)
	}
	var toks []uint64
	for _, r := range recs {
		toks = append(toks, r.Token)
	}
	if !slices.Contains(toks, r1.Token()) || !slices.Contains(toks, r2.Token()) {
		t.Errorf("forced releases recorded tokens %v, want both readers' %d and %d", toks, r1.Token(), r2.Token())
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	limit := padlock.WithLimit(2)
	p1 := must(t)(a.Lock(ctx, "sem", limit))
	p2 := must(t)(b.Lock(ctx, "sem", limit))
	third := lockLater(func() (*padlock.Lock, error) { return c.Lock(ctx, "sem", limit) })
	waitKeys(t, ctx, h, 3)
	hs, err = a.Holders(ctx, "sem")
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 2 || hs[0].Token != p1.Token() || hs[1].Token != p2.Token() {
		t.Fatalf("Holders = %+v, want the two permits", hs)
	}
	for _, got := range hs {
		if got.Mode != backends.Exclusive || got.Limit != 2 || got.Waiters != 1 {
			t.Errorf("permit holder = %v, limit %d, %d waiting; want exclusive, limit 2, 1 waiting", got.Mode, got.Limit, got.Waiters)
		}
	}
	if err := p1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	p3 := <-third
	if p3 == nil {
		t.Fatal("the third permit was not granted when the first was freed")
	}
	for _, lk := range []*padlock.Lock{p2, p3} {
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitEmpty(t, h, ctx)
}

// A limit is checked against every key ahead in line, waiters included,
// not only against the holder: a key asking limit 2 that waits behind a
// permit of 3 (its client has not yet seen the mismatch and withdrawn it)
// makes a request for 3 fail, on each path (single try, and a wait whose
// put sees it, and a mutex's wait, which learns it from the queue), and
// leave nothing.
func TestLimitMismatchAgainstWaiter(t *testing.T) {
	h, ctx := etcdTest(t)
	a, b := conformance.NewLocker(ctx, t, h), conformance.NewLocker(ctx, t, h)
	holder := must(t)(a.Lock(ctx, "m", padlock.WithLimit(3)))
	keys, err := h.State(ctx)
	if err != nil || len(keys) != 1 {
		t.Fatalf("state %q (%v), want the holder's key", keys, err)
	}
	pfx := keys[0][:strings.LastIndexByte(keys[0], '/')+1]
	lease, err := h.inspector.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	defer h.inspector.Revoke(context.Background(), lease.ID)
	// Another client's permit of 2, queued behind the holder.
	if _, err := h.inspector.Put(ctx, pfx+"other-0", `X2{"host":"elsewhere"}`, clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what  string
		try   func() (*padlock.Lock, error)
		limit string
	}{
		{"TryLock", func() (*padlock.Lock, error) { return b.TryLock(ctx, "m", padlock.WithLimit(3)) }, "3"},
		{"Lock", func() (*padlock.Lock, error) {
			return b.Lock(ctx, "m", padlock.WithLimit(3), padlock.WithWait(time.Minute))
		}, "3"},
		{"a plain Lock", func() (*padlock.Lock, error) { return b.Lock(ctx, "m", padlock.WithWait(time.Minute)) }, "1"},
	} {
		lk, err := c.try()
		if lk != nil {
			lk.Unlock(ctx)
		}
		if !errors.Is(err, padlock.ErrInvalidOption) {
			t.Fatalf("%s with a waiter of limit 2 ahead = %v, want ErrInvalidOption", c.what, err)
		}
		if msg := err.Error(); !strings.Contains(msg, "limit 2") || !strings.Contains(msg, "limit "+c.limit) {
			t.Errorf("%s: %q does not name the waiter's limit 2 and the asked %s", c.what, msg, c.limit)
		}
		waitKeys(t, ctx, h, 2) // the holder and the waiter: the request left nothing
	}
	if _, err := h.inspector.Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	second := must(t)(b.TryLock(ctx, "m", padlock.WithLimit(3))) // the waiter gone, the limit agrees
	for _, lk := range []*padlock.Lock{second, holder} {
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitEmpty(t, h, ctx)
}

// The downgrade's Share is one Txn whose answer may be lost, applied or
// not. Whatever happened, the hold keeps working: it renews past its TTL,
// others see it as the server has it (a reader, or still a writer), and
// its Release removes its key.
func TestShareAnswerLost(t *testing.T) {
	const ttl = 6 * time.Second // room for the fault within one lease
	for _, applied := range []bool{true, false} {
		name := map[bool]string{true: "Applied", false: "NotApplied"}[applied]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, ctx := etcdTest(t)
			a, b := conformance.NewLocker(ctx, t, h), conformance.NewLocker(ctx, t, h)
			job := padlock.WithOwner(ctx, "job")
			w := must(t)(a.Lock(job, "d", padlock.WithTTL(ttl)))
			r := must(t)(a.RLock(job, "d"))
			keys, err := h.State(ctx)
			if err != nil || len(keys) != 1 {
				t.Fatalf("state %q (%v), want the writer's key", keys, err)
			}
			before, err := h.inspector.Get(ctx, keys[0])
			if err != nil || len(before.Kvs) != 1 {
				t.Fatalf("the writer's key: %v", err)
			}
			p := h.proxies.Of(a)[0]
			var heal func() error
			if applied {
				heal, err = p.DropAnswers(ctx)
			} else {
				heal, err = p.Blackhole(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			uctx, cancel := context.WithTimeout(ctx, time.Second) // Share gives up within the lease
			unlocked := make(chan error, 1)
			go func() { unlocked <- w.Unlock(uctx) }()
			if applied {
				conformance.WaitFor(ctx, t, "the Share applied on the server", time.Minute, func() bool {
					resp, err := h.inspector.Get(ctx, keys[0])
					return err == nil && len(resp.Kvs) == 1 && strings.HasPrefix(string(resp.Kvs[0].Value), "S")
				})
			}
			uerr := <-unlocked
			cancel()
			t.Logf("Unlock of the write side: %v", uerr)
			if err := heal(); err != nil {
				t.Fatal(err)
			}
			if !applied && uerr == nil {
				t.Fatal("Unlock reported a Share that never reached the server as done")
			}
			healed := time.Now()
			other, err := b.TryRLock(ctx, "d")
			switch {
			case applied && err != nil:
				t.Errorf("TryRLock beside a writer turned reader on the server = %v, want a reader", err)
			case !applied && !errors.Is(err, padlock.ErrNotAcquired):
				t.Errorf("TryRLock beside a writer whose Share never arrived = %v, want ErrNotAcquired", err)
			}
			if lk, err := b.TryLock(ctx, "d"); !errors.Is(err, padlock.ErrNotAcquired) {
				if lk != nil {
					lk.Unlock(ctx)
				}
				t.Errorf("TryLock while the owner still reads = %v, want ErrNotAcquired", err)
			}
			// Past a whole TTL from the heal, the key lives only if its
			// lease was renewed.
			for time.Since(healed) < ttl+time.Second {
				select {
				case <-r.Done():
					t.Fatalf("the read side was lost after the Share: %v", r.Err())
				case <-time.After(100 * time.Millisecond):
				}
			}
			resp, err := h.inspector.Get(ctx, keys[0])
			if err != nil || len(resp.Kvs) != 1 {
				t.Fatalf("the key is gone a TTL after the fault (err %v): the hold was not renewed", err)
			}
			if kv, was := resp.Kvs[0], before.Kvs[0]; kv.CreateRevision != was.CreateRevision || kv.Lease != was.Lease {
				t.Errorf("after the Share the key has create revision %d and lease %x, before %d and %x: want its place, token and lease kept",
					kv.CreateRevision, kv.Lease, was.CreateRevision, was.Lease)
			}
			if err := r.Unlock(ctx); err != nil {
				t.Errorf("Unlock of the read side: %v", err)
			}
			if other != nil {
				if err := other.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}
			waitEmpty(t, h, ctx)
		})
	}
}

// LockAll of five free names is one Txn, not five: counted on a server of
// the test's own (so no other test's requests are counted). Every key it
// put has the Txn's revision as its create revision, the members' token,
// and is bound to the Locker's lease, as a per-name hold's key is; with
// one name held elsewhere the Txn puts nothing.
func TestLockAllOneRequest(t *testing.T) {
	_, ctx := etcdTest(t)
	srv, err := padlocktest.New(ctx, padlocktest.Etcd, padlocktest.Nodes(1))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	addr := srv.Nodes()[0].Addr
	l, err := padlock.Open(ctx, "etcd://"+addr+"/lockall")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	other, err := padlock.Open(ctx, "etcd://"+addr+"/lockall")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	txns := func() float64 {
		return metric(t, ctx, addr, "grpc_server_handled_total{", `grpc_method="Txn"`)
	}
	names := []string{"e", "a", "d", "b", "c"}
	padlock.UnlockAll(ctx, must2(t)(l.LockAll(ctx, names))) // grants the session lease
	before := txns()
	locks := must2(t)(l.LockAll(ctx, names))
	if n := txns() - before; n != 1 {
		t.Errorf("LockAll of %d free names sent %v Txn requests, want 1", len(names), n)
	}
	resp, err := cli.Get(ctx, "/lockall/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != len(names) {
		t.Fatalf("%d keys under /lockall/ after LockAll of %d names", len(resp.Kvs), len(names))
	}
	for _, kv := range resp.Kvs {
		if uint64(kv.CreateRevision) != locks[0].Token() || kv.Lease == 0 {
			t.Errorf("key %s: create revision %d, lease %x; want the members' token %d and a lease",
				kv.Key, kv.CreateRevision, kv.Lease, locks[0].Token())
		}
	}
	for i, lk := range locks {
		if lk.Name() != names[i] || lk.Token() != locks[0].Token() {
			t.Errorf("handle %d: %q token %d, want %q token %d", i, lk.Name(), lk.Token(), names[i], locks[0].Token())
		}
	}
	if err := padlock.UnlockAll(ctx, locks); err != nil {
		t.Fatal(err)
	}

	// One name held elsewhere: the Txn fails and puts nothing; LockAll
	// then waits name by name, and takes all once the holder lets go.
	held := must(t)(other.Lock(ctx, "c"))
	res := make(chan []*padlock.Lock, 1)
	go func() {
		locks, err := l.LockAll(ctx, names)
		if err != nil {
			t.Error(err)
		}
		res <- locks
	}()
	// Waiting for c: a, b and c's waiter are there, d and e are not.
	padlocktest.WaitFor(t, "LockAll waiting for c", 30*time.Second, func() bool {
		r, err := cli.Get(ctx, "/lockall/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && r.Count == 4
	})
	for _, n := range []string{"d", "e"} {
		if r, err := cli.Get(ctx, "/lockall/"+n+"/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || r.Count != 0 {
			t.Errorf("%q has %v keys (%v) while LockAll waits for c; want none", n, r.Count, err)
		}
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if locks := <-res; locks != nil {
		if err := padlock.UnlockAll(ctx, locks); err != nil {
			t.Fatal(err)
		}
	}
}

// must2 is must for LockAll.
func must2(t testing.TB) func(locks []*padlock.Lock, err error) []*padlock.Lock {
	return func(locks []*padlock.Lock, err error) []*padlock.Lock {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return locks
	}
}

// BenchmarkLockAll compares LockAll of four free names (one Txn) with the
// per-name path it replaces (four Locks in byte order), each followed by
// its four Unlocks. Compare the two ns/op: a ratio, not a docs number.
func BenchmarkLockAll(b *testing.B) {
	ctx := context.Background()
	l, err := padlock.Open(ctx, "etcd://"+server.Nodes()[0].Addr+"/bench-lockall")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	names := []string{"a", "b", "c", "d"}
	b.Run("one-request", func(b *testing.B) {
		for b.Loop() {
			padlock.UnlockAll(ctx, must2(b)(l.LockAll(ctx, names)))
		}
	})
	b.Run("per-name", func(b *testing.B) {
		locks := make([]*padlock.Lock, len(names))
		for b.Loop() {
			for i, n := range names {
				lk, err := l.Lock(ctx, n)
				if err != nil {
					b.Fatal(err)
				}
				locks[i] = lk
			}
			if err := padlock.UnlockAll(ctx, locks); err != nil {
				b.Fatal(err)
			}
		}
	})
}
