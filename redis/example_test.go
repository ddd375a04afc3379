package redis_test

import (
	"context"
	"fmt"
	"log"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/redis"
)

// Open a fair (FIFO) Redis Locker by URL and take a lock. (These examples
// need a Redis server, so go test compiles them but does not run them; the
// conformance suite runs the same paths against one.)
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
