package zookeeper_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/padlock-go/padlock"
	_ "github.com/padlock-go/padlock/zookeeper"
)

// Open a ZooKeeper Locker by URL, with digest auth, and take a lock. (This
// example needs a ZooKeeper ensemble, so go test compiles it but does not
// run it; the conformance suite runs the same paths against one.)
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
