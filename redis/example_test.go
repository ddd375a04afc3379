package redis_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock"
	_ "github.com/padlock-go/padlock/memory"
	"github.com/padlock-go/padlock/redis"
)

// Open a fair (FIFO) Redis Locker by URL and take a lock. (The examples
// that need a Redis server are compiled by go test but not run; the
// conformance suite runs the same paths against one, and
// Example_unitTests runs the leader pattern of Example_redLock on
// mem://.)
func Example() {
	ctx := context.Background()
	locker, err := padlock.Open(ctx, "redis://127.0.0.1:6379/0?fair=true&ttl=10s")
	if err != nil {
		log.Fatal(err) // errors.Is(err, padlock.ErrUnavailable) if no server answers
	}
	defer locker.Close()

	lk, err := locker.Lock(ctx, "orders/42", padlock.WithWait(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer lk.Unlock(ctx)
	fmt.Println("holding orders/42 with fencing token", lk.Token())
}

// RedLock over three independent masters: a hold needs a majority.
func Example_redLock() {
	ctx := context.Background()
	locker, err := padlock.Open(ctx, "redlock://redis-a:6379,redis-b:6379,redis-c:6379?ttl=10s")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	lk, err := locker.TryLock(ctx, "leader")
	if err != nil {
		log.Fatal(err) // errors.Is(err, padlock.ErrNotAcquired) when another client leads
	}
	defer lk.Unlock(ctx)
	<-lk.Done() // lead until the hold is lost
}

// Build a Locker over a go-redis client the application already has;
// closing the Locker leaves the client open.
func ExampleNew() {
	ctx := context.Background()
	cli := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer cli.Close()

	locker, err := redis.New(ctx, cli, redis.Options{Prefix: "myapp", Fair: true})
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	lk, err := locker.Lock(ctx, "inventory/7")
	if err != nil {
		log.Fatal(err)
	}
	defer lk.Unlock(ctx)
}

// The leader pattern of Example_redLock in a unit test: the code takes a
// *padlock.Locker, and the test gives it one on mem://, the in-process
// backend. One candidate leads; the other's TryLock fails at once; when
// the leader steps down, its Done closes (as it would if the hold were
// lost) and the other takes over.
func Example_unitTests() {
	ctx := context.Background()
	url := "mem://redis-example?ttl=10s" // production: redlock://redis-a:6379,redis-b:6379,redis-c:6379?ttl=10s
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

	lead, err := a.TryLock(ctx, "leader")
	if err != nil {
		log.Fatal(err)
	}
	_, err = b.TryLock(ctx, "leader")
	fmt.Println("b leads too:", !errors.Is(err, padlock.ErrNotAcquired))
	if err := lead.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	<-lead.Done() // a leader's loop ends here, whether it stepped down or lost the lock
	next, err := b.TryLock(ctx, "leader")
	if err != nil {
		log.Fatal(err)
	}
	defer next.Unlock(ctx)
	fmt.Println("b took over:", next.Name())
	// Output:
	// b leads too: false
	// b took over: leader
}
