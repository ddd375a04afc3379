package zookeeper_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/padlock-go/padlock"
	_ "github.com/padlock-go/padlock/memory"
	_ "github.com/padlock-go/padlock/zookeeper"
)

// Open a ZooKeeper Locker by URL, with digest auth, and take a lock. (This
// example needs a ZooKeeper ensemble, so go test compiles it but does not
// run it; the conformance suite runs the same paths against one, and
// Example_unitTests runs them on mem://.)
func Example() {
	ctx := context.Background()
	locker, err := padlock.Open(ctx, "zk://zk1:2181,zk2:2181,zk3:2181/myapp/locks?ttl=6s&digest=myapp:secret")
	if err != nil {
		log.Fatal(err) // errors.Is(err, padlock.ErrUnavailable) if no server answers
	}
	defer locker.Close()

	lk, err := locker.Lock(ctx, "orders/42", padlock.WithWait(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer lk.Unlock(ctx)
	// The token is the queue node's czxid: it rises across holders, also
	// across a failover, so the storage you write to can refuse old ones.
	fmt.Println("holding orders/42 with fencing token", lk.Token())
}

// Code that locks through ZooKeeper in production takes a
// *padlock.Locker, so that its unit tests can give it one on mem://, the
// in-process backend. A bounded wait behind another holder fails with
// ErrTimeout, which also matches context.DeadlineExceeded, and leaves no
// queue entry behind: the holder's release hands the lock straight on.
func Example_unitTests() {
	ctx := context.Background()
	url := "mem://zookeeper-example?ttl=6s" // production: zk://zk1:2181,zk2:2181,zk3:2181/myapp/locks?ttl=6s
	a, err := padlock.Open(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := padlock.Open(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	held, err := a.Lock(ctx, "orders/42")
	if err != nil {
		log.Fatal(err)
	}
	_, err = b.Lock(ctx, "orders/42", padlock.WithWait(50*time.Millisecond))
	fmt.Println(errors.Is(err, padlock.ErrTimeout), errors.Is(err, context.DeadlineExceeded))
	if err := held.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	next, err := b.TryLock(ctx, "orders/42")
	if err != nil {
		log.Fatal(err)
	}
	defer next.Unlock(ctx)
	fmt.Println("next holder's token is higher:", next.Token() > held.Token())
	// Output:
	// true true
	// next holder's token is higher: true
}
