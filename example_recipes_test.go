package padlock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/padlock-go/padlock"
)

// Readers share a name; a writer (Lock) waits for them and keeps them
// out while it writes.
func ExampleLocker_RLock() {
	ctx := context.Background()
	a, _ := padlock.Open(ctx, "mem://example-rlock")
	b, _ := padlock.Open(ctx, "mem://example-rlock")
	defer a.Close()
	defer b.Close()

	r1, _ := a.RLock(ctx, "catalog")
	r2, err := b.TryRLock(ctx, "catalog")
	fmt.Println("second reader:", err)
	_, err = b.TryLock(ctx, "catalog")
	fmt.Println("writer while reading:", errors.Is(err, padlock.ErrNotAcquired))
	r1.Unlock(ctx)
	r2.Unlock(ctx)

	w, _ := b.Lock(ctx, "catalog")
	fmt.Println("writer's token is above the readers':", w.Token() > r2.Token())
	w.Unlock(ctx)
	// Output:
	// second reader: <nil>
	// writer while reading: true
	// writer's token is above the readers': true
}

// An owner that writes may read under its own write hold, and keep
// reading after it stops writing: its hold turns into a reader in place.
// An owner that only reads cannot start writing (ErrUpgrade).
func ExampleLocker_RLock_downgrade() {
	ctx := context.Background()
	a, _ := padlock.Open(ctx, "mem://example-downgrade")
	b, _ := padlock.Open(ctx, "mem://example-downgrade")
	defer a.Close()
	defer b.Close()

	job := padlock.WithOwner(ctx, "rebuild-index")
	w, _ := a.Lock(job, "index")
	r, _ := a.RLock(job, "index") // a read handle on the write hold
	w.Unlock(ctx)                 // keeps reading; other readers may come in
	other, err := b.TryRLock(ctx, "index")
	fmt.Println("another reader:", err)
	_, err = a.Lock(job, "index")
	fmt.Println("read-only owner asks to write:", errors.Is(err, padlock.ErrUpgrade))
	other.Unlock(ctx)
	r.Unlock(ctx)
	// Output:
	// another reader: <nil>
	// read-only owner asks to write: true
}

// WithLimit makes a semaphore: up to n holds of a name at once, each with
// its own lease, Done and token.
func ExampleWithLimit() {
	ctx := context.Background()
	l, _ := padlock.Open(ctx, "mem://example-limit")
	defer l.Close()

	var held []*padlock.Lock
	for range 3 {
		lk, err := l.TryLock(ctx, "encoders", padlock.WithLimit(3))
		if err != nil {
			panic(err)
		}
		held = append(held, lk)
	}
	_, err := l.TryLock(ctx, "encoders", padlock.WithLimit(3))
	fmt.Println("fourth:", errors.Is(err, padlock.ErrNotAcquired))
	_, err = l.TryLock(ctx, "encoders", padlock.WithLimit(5))
	fmt.Println("another limit:", errors.Is(err, padlock.ErrInvalidOption))
	fmt.Println(padlock.UnlockAll(ctx, held))
	// Output:
	// fourth: true
	// another limit: true
	// <nil>
}

// LockAll takes several names, all or none, in an order that cannot
// deadlock against another LockAll, and returns them in the caller's
// order.
func ExampleLocker_LockAll() {
	ctx := context.Background()
	l, _ := padlock.Open(ctx, "mem://example-lockall")
	defer l.Close()

	locks, err := l.LockAll(ctx, []string{"accounts/bob", "accounts/alice"})
	if err != nil {
		panic(err)
	}
	defer padlock.UnlockAll(ctx, locks)
	for _, lk := range locks {
		fmt.Println(lk.Name())
	}
	// Output:
	// accounts/bob
	// accounts/alice
}
