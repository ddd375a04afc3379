package padlock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/conformance"
)

// shortBatch is a driver that breaks the BatchRenewer contract: its
// RenewBatch returns no result at all, for however many holds it was
// given. Nothing else about it matters; its holds are always granted.
type shortBatch struct{ asked atomic.Int64 } // the most holds one RenewBatch was given

func (d *shortBatch) Acquire(_ context.Context, req backends.Request) (backends.Hold, error) {
	return &alwaysHold{ttl: req.TTL, sent: time.Now()}, nil
}
func (d *shortBatch) Capabilities() backends.Capabilities {
	return backends.Capabilities{Consistency: backends.CP, MinTTL: time.Millisecond}
}
func (d *shortBatch) Close(context.Context) error { return nil }
func (d *shortBatch) RenewBatch(_ context.Context, holds []backends.Hold) []backends.RenewResult {
	for n := int64(len(holds)); ; {
		old := d.asked.Load()
		if n <= old || d.asked.CompareAndSwap(old, n) {
			break
		}
	}
	return nil
}

type alwaysHold struct {
	ttl  time.Duration
	sent time.Time
}

func (h *alwaysHold) Token() uint64         { return 1 }
func (h *alwaysHold) Grant() backends.Grant { return backends.Grant{Sent: h.sent, TTL: h.ttl} }
func (h *alwaysHold) Renew(context.Context) (backends.Grant, error) {
	return backends.Grant{Sent: time.Now(), TTL: h.ttl}, nil
}
func (h *alwaysHold) Release(context.Context) error { return nil }

// syncBuffer is a bytes.Buffer that a log handler may write to from any
// goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A batch renewal whose driver returns the wrong number of results fails
// every hold in it, with a message that gives both numbers. It used to
// count the results after replacing them, and said "returned N results
// for N holds".
func TestRenewBatchWrongCount(t *testing.T) {
	var logs syncBuffer
	drv := &shortBatch{}
	l, err := padlock.NewLocker(drv, padlock.WithTTL(time.Second),
		padlock.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	// Taken together, renewed together: one batch.
	for i := range 8 {
		if _, err := l.Lock(ctx, "name-"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	said := regexp.MustCompile(`driver returned (\d+) results for (\d+) holds`)
	conformance.WaitFor(context.Background(), t, "a batch renewal's failure in the log", 30*time.Second, func() bool { return said.MatchString(logs.String()) })
	for _, m := range said.FindAllStringSubmatch(logs.String(), -1) {
		got, holds := m[1], m[2]
		if n, _ := strconv.Atoi(holds); got != "0" || n < 2 || int64(n) > drv.asked.Load() {
			t.Errorf("the log says %q; the driver returned 0 results, for batches of up to %d holds", m[0], drv.asked.Load())
		}
	}
}

// failingLease is a driver whose holds all share one lease (a session, as
// on etcd and ZooKeeper) that can never be renewed: every hold under it is
// lost at once, at the lease's deadline.
type failingLease struct {
	mu   sync.Mutex
	sent time.Time // the lease's grant, from the first acquisition
}

func (d *failingLease) Acquire(_ context.Context, req backends.Request) (backends.Hold, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sent.IsZero() {
		d.sent = time.Now()
	}
	return &alwaysHold{ttl: req.TTL, sent: d.sent}, nil
}
func (d *failingLease) Capabilities() backends.Capabilities {
	return backends.Capabilities{Consistency: backends.CP, MinTTL: time.Millisecond}
}
func (d *failingLease) Close(context.Context) error { return nil }
func (d *failingLease) LeaseOf(backends.Hold) any   { return "the lease" }
func (d *failingLease) RenewLease(context.Context, any, backends.Grant, []backends.Hold) (backends.Grant, []error, error) {
	return backends.Grant{}, nil, backends.ErrUnavailable
}

// blockingLog is a log handler whose first record of a lost lock blocks
// until release closes: a handler that writes to a stalled pipe.
type blockingLog struct {
	slog.Handler
	release chan struct{}
	blocked atomic.Bool
}

func (h *blockingLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "padlock: lock lost" && h.blocked.CompareAndSwap(false, true) {
		<-h.release
	}
	return h.Handler.Handle(ctx, r)
}

// Holds lost together (a lease of many) all have their Done closed at the
// lease's deadline, before any of them runs the code that records a loss:
// a log handler that blocks on the first loss's record must not hold back
// the others' Done, nor the renewal loop.
func TestLostTogetherCloseBeforeLogging(t *testing.T) {
	var logs syncBuffer
	h := &blockingLog{Handler: slog.NewTextHandler(&logs, nil), release: make(chan struct{})}
	l, err := padlock.NewLocker(&failingLease{}, padlock.WithTTL(2*time.Second), padlock.WithLogger(slog.New(h)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	defer close(h.release) // before Close, which waits for the handler
	ctx := context.Background()
	var held []*padlock.Lock
	for i := range 4 {
		lk, err := l.Lock(ctx, "name-"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, lk)
	}
	conformance.WaitFor(ctx, t, "every hold of the lost lease ended", 30*time.Second, func() bool {
		for _, lk := range held {
			select {
			case <-lk.Done():
			default:
				return false
			}
		}
		return true
	})
	for _, lk := range held {
		if !errors.Is(lk.Err(), padlock.ErrLost) {
			t.Errorf("%v: Err %v, want ErrLost", lk, lk.Err())
		}
	}
	if !h.blocked.Load() {
		t.Error("no loss was logged")
	}
}
