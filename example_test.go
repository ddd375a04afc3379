package padlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/padlock-go/padlock"
	_ "github.com/padlock-go/padlock/memory" // or etcd, or all
)

// Lock blocks until the lock is held. Always release it, and watch Done:
// holding a distributed lock is never a certainty.
func ExampleLocker_Lock() {
	ctx := context.Background()
	locker, err := padlock.Open(ctx, "mem://example-lock?ttl=5s")
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	lk, err := locker.Lock(ctx, "orders/42")
	if err != nil {
		panic(err)
	}
	defer lk.Unlock(ctx)

	select {
	case <-lk.Done():
		fmt.Println("lost the lock:", lk.Err())
	default:
		fmt.Println("holding", lk.Name())
	}
	// Output: holding orders/42
}

// TryLock never waits for the holder.
func ExampleLocker_TryLock() {
	ctx := context.Background()
	a, _ := padlock.Open(ctx, "mem://example-trylock")
	b, _ := padlock.Open(ctx, "mem://example-trylock")
	defer a.Close()
	defer b.Close()

	lk, _ := a.Lock(ctx, "report")
	_, err := b.TryLock(ctx, "report")
	fmt.Println(errors.Is(err, padlock.ErrNotAcquired))
	lk.Unlock(ctx)
	// Output: true
}

// WithWait bounds the wait; so does a context deadline. Either way the error
// matches ErrTimeout and context.DeadlineExceeded.
func ExampleWithWait() {
	ctx := context.Background()
	a, _ := padlock.Open(ctx, "mem://example-wait")
	b, _ := padlock.Open(ctx, "mem://example-wait")
	defer a.Close()
	defer b.Close()

	lk, _ := a.Lock(ctx, "nightly-job")
	defer lk.Unlock(ctx)
	_, err := b.Lock(ctx, "nightly-job", padlock.WithWait(50*time.Millisecond))
	fmt.Println(errors.Is(err, padlock.ErrTimeout), errors.Is(err, context.DeadlineExceeded))
	// Output: true true
}

// An owner in the context makes locking reentrant: the same owner on the
// same Locker gets the lock again at once, and the last Unlock releases it.
func ExampleWithOwner() {
	ctx := context.Background()
	locker, _ := padlock.Open(ctx, "mem://example-owner")
	other, _ := padlock.Open(ctx, "mem://example-owner")
	defer locker.Close()
	defer other.Close()

	job := padlock.WithOwner(ctx, "job-7")
	outer, _ := locker.Lock(job, "ledger")
	inner, _ := locker.Lock(job, "ledger") // reentrant: count 2
	inner.Unlock(ctx)                      // count 1: still held

	_, err := other.TryLock(ctx, "ledger")
	fmt.Println("still held:", errors.Is(err, padlock.ErrNotAcquired))
	outer.Unlock(ctx) // count 0: released

	lk, err := other.TryLock(ctx, "ledger")
	fmt.Println("released:", err == nil)
	lk.Unlock(ctx)
	// Output:
	// still held: true
	// released: true
}

// storage stands for the resource the lock protects. It remembers the
// highest fencing token it has seen and refuses older ones, so a holder that
// was paused past its lease cannot overwrite a newer holder's work.
type storage struct {
	lastToken uint64
	balance   int
}

func (s *storage) Add(token uint64, amount int) error {
	if token < s.lastToken {
		return fmt.Errorf("stale fencing token %d < %d", token, s.lastToken)
	}
	s.lastToken = token
	s.balance += amount
	return nil
}

// Pass the token to the storage you write to, and let it reject stale ones.
func ExampleLock_Token() {
	ctx := context.Background()
	locker, _ := padlock.Open(ctx, "mem://example-fencing")
	defer locker.Close()
	store := &storage{}

	first, _ := locker.Lock(ctx, "account/7")
	firstToken := first.Token()
	first.Unlock(ctx)

	second, _ := locker.Lock(ctx, "account/7")
	fmt.Println("second token is higher:", second.Token() > firstToken)
	fmt.Println("second holder writes:", store.Add(second.Token(), 100) == nil)
	second.Unlock(ctx)

	// A first holder that woke up late is fenced off.
	fmt.Println("stale holder refused:", store.Add(firstToken, -100) != nil)
	// Output:
	// second token is higher: true
	// second holder writes: true
	// stale holder refused: true
}

// List who holds what, as an operator would (padlock holders), and break a
// stuck lock (padlock unlock --force): its holder's Done closes at its
// next renewal.
func ExampleLocker_Holders() {
	ctx := context.Background()
	app, _ := padlock.Open(ctx, "mem://example-holders?ttl=3s")
	defer app.Close()
	ops, _ := padlock.Open(ctx, "mem://example-holders")
	defer ops.Close()

	lk, _ := app.Lock(padlock.WithOwner(ctx, "nightly-job"), "reports/daily")
	holders, _ := ops.Holders(ctx, "reports/")
	for _, h := range holders {
		fmt.Println(h.Name, "held by", h.Owner, "token", h.Token, "waiters", h.Waiters)
	}

	if _, err := ops.ForceUnlock(ctx, "reports/daily"); err != nil {
		fmt.Println(err)
	}
	<-lk.Done()
	fmt.Println(errors.Is(lk.Err(), padlock.ErrLost))
	// Output:
	// reports/daily held by nightly-job token 1 waiters 0
	// true
}
