package memory_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var stores atomic.Int64

// Every fault the suite knows but a silent endpoint, which the harness
// declares it lacks: one it stopped implementing fails to compile here.
var (
	_ conformance.Cutter     = (*harness)(nil)
	_ conformance.Killer     = (*harness)(nil)
	_ conformance.Restarter  = (*harness)(nil)
	_ conformance.Blackholer = (*harness)(nil)
	_ conformance.Stopper    = (*harness)(nil)
	_ conformance.Failoverer = (*harness)(nil)
	_ conformance.Limited    = (*harness)(nil)
)

// harness gives each subtest its own store, and each Locker its own client
// id so that Cut and Kill can single it out.
type harness struct {
	store   string
	mu      sync.Mutex
	clients map[*padlock.Locker]string
}

func (h *harness) NewLocker(ctx context.Context, opts ...padlock.OpenOption) (*padlock.Locker, error) {
	h.mu.Lock()
	id := fmt.Sprintf("c%d", len(h.clients)+1)
	h.mu.Unlock()
	l, err := padlock.Open(ctx, fmt.Sprintf("mem://%s?client=%s", h.store, id), opts...)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.clients[l] = id
	h.mu.Unlock()
	return l, nil
}

func (h *harness) TTL() time.Duration { return time.Second }

func (h *harness) State(context.Context) ([]string, error) { return memory.Keys(h.store), nil }

func (h *harness) client(l *padlock.Locker) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.clients[l]
}

func (h *harness) Cut(_ context.Context, l *padlock.Locker) (func() error, error) {
	id := h.client(l)
	memory.Cut(h.store, id, true)
	return func() error { memory.Cut(h.store, id, false); return nil }, nil
}

// Blackhole freezes the client: its requests hang and ignore their
// deadlines, the worst case for the renewal loop.
func (h *harness) Blackhole(_ context.Context, l *padlock.Locker) (func() error, error) {
	thaw := memory.Freeze(h.store, h.client(l))
	return func() error { thaw(); return nil }, nil
}

func (h *harness) Kill(_ context.Context, l *padlock.Locker) error {
	memory.Cut(h.store, h.client(l), true)
	return nil
}

func (h *harness) RestartServer(context.Context) error {
	memory.Restart(h.store)
	return nil
}

func (h *harness) StopServer(context.Context) (func(context.Context) error, error) {
	memory.Down(h.store, true)
	return func(context.Context) error { memory.Down(h.store, false); return nil }, nil
}

// Failover restarts the store: it keeps its fencing counters, as a
// store whose counters a failover preserved would.
func (h *harness) Failover(ctx context.Context) error { return h.RestartServer(ctx) }

// Unsupported: an in-process store has no connection to go silent.
func (h *harness) Unsupported() map[conformance.Feature]string {
	return map[conformance.Feature]string{
		conformance.FeatureSilentOpen: "mem:// opens no connection, so there is no endpoint to go silent",
	}
}

func (h *harness) Close() error { return nil }

func TestConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T) conformance.Harness { return newHarness("conformance") }, conformance.Promises(promised))
}

// promised is what mem:// promises (docs/guarantees.md): every guarantee,
// as a CP backend with no replicas.
var promised = padlock.Capabilities{Consistency: padlock.CP, FairFIFO: true, MonotonicTokens: true,
	FencingSurvivesFailover: true, PushWakeup: true, DoneBeforeRegrant: true,
	SharedLocks: true, Limits: true, Elections: true}

// newHarness is a harness on a store of its own, named after prefix.
func newHarness(prefix string) *harness {
	return &harness{store: fmt.Sprintf("%s-%d", prefix, stores.Add(1)), clients: map[*padlock.Locker]string{}}
}

// A second Freeze of a client replaces the first without stranding the
// requests that waited on it: thawing both, in either order, or the later
// alone, lets every request through. (The first freeze's waiters used to
// hang for the life of the process once a second Freeze replaced it.)
func TestFreezeTwice(t *testing.T) {
	for _, order := range []string{"first, then second", "second, then first", "second only"} {
		t.Run(order, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			store := fmt.Sprintf("freeze-twice-%d", stores.Add(1))
			l, err := padlock.Open(ctx, "mem://"+store+"?client=c")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			thaw1 := memory.Freeze(store, "c")
			done := make(chan error, 1)
			go func() {
				lk, err := l.TryLock(ctx, "n")
				if err == nil {
					err = lk.Unlock(ctx)
				}
				done <- err
			}()
			conformance.WaitFor(ctx, t, "the request stuck on the first freeze", 30*time.Second, func() bool { return memory.Stuck(store, "c") == 1 })
			thaw2 := memory.Freeze(store, "c")
			switch order {
			case "first, then second":
				thaw1()
				thaw2()
			case "second, then first":
				thaw2()
				thaw1()
			default:
				thaw2()
				defer thaw1()
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the request that waited on the first freeze still hangs after the thaws")
			}
		})
	}
}

// A waiter's grant made while its client is frozen reaches it only after
// the thaw, as on a silent network: it used to return at once.
func TestFreezeHoldsBackAWaitersGrant(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store := fmt.Sprintf("freeze-waiter-%d", stores.Add(1))
	open := func(client string) *padlock.Locker {
		l, err := padlock.Open(ctx, "mem://"+store+"?client="+client, padlock.WithTTL(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	a, b := open("a"), open("b")
	held, err := a.Lock(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *padlock.Lock, 1)
	go func() {
		lk, err := b.Lock(ctx, "n")
		if err != nil {
			t.Error(err)
		}
		got <- lk
	}()
	conformance.WaitFor(ctx, t, "b waiting", 30*time.Second, func() bool {
		hs, err := a.Holders(ctx, "n")
		return err == nil && len(hs) == 1 && hs[0].Waiters == 1
	})
	thaw := memory.Freeze(store, "b")
	defer thaw()
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The store grants b at once; the answer is held back. (A Lock that
	// returned would be stuck next in its first renewal, later.)
	conformance.WaitFor(ctx, t, "b's answer held back", 30*time.Second, func() bool { return memory.Stuck(store, "b") == 1 })
	select {
	case <-got:
		t.Fatal("b's Lock returned while b was frozen")
	default:
	}
	thaw()
	lk := <-got
	if lk == nil {
		t.Fatal("b's Lock failed after the thaw")
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Closing a Locker ends its requests that a Freeze holds, as closing a real
// client ends calls that ignore their context: they fail, and the Close
// does not wait out its bound for them. (The driver's Close did nothing,
// and a frozen call hung until the thaw.)
func TestCloseEndsFrozenRequests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store := fmt.Sprintf("close-frozen-%d", stores.Add(1))
	l, err := padlock.Open(ctx, "mem://"+store+"?client=c")
	if err != nil {
		t.Fatal(err)
	}
	thaw := memory.Freeze(store, "c")
	defer thaw()
	done := make(chan error, 1)
	go func() {
		_, err := l.Holders(context.Background(), "")
		done <- err
	}()
	conformance.WaitFor(ctx, t, "the request stuck", 30*time.Second, func() bool { return memory.Stuck(store, "c") == 1 })
	closed := make(chan error, 1)
	go func() {
		// A short bound: Close waits that long for calls in flight, then
		// closes the driver, which is what ends a call that ignores its
		// context.
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		closed <- l.CloseContext(cctx)
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the frozen request succeeded")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the frozen request still hangs 30s after its Locker's Close began")
	}
	<-closed
	if n := memory.Stuck(store, "c"); n != 0 {
		t.Fatalf("%d requests still stuck after Close", n)
	}
}
