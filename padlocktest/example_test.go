package padlocktest_test

import (
	"context"
	"fmt"

	"github.com/padlock-go/padlock"
	_ "github.com/padlock-go/padlock/etcd"
	"github.com/padlock-go/padlock/padlocktest"
	_ "github.com/padlock-go/padlock/redis"
)

// A user's test takes a lock on a real Redis and on embedded etcd. In a
// test function, padlocktest.Start(t, kind) starts the server and stops it
// when the test ends; New and Close do the same by hand here, since an
// example has no *testing.T.
func Example() {
	ctx := context.Background()
	for _, kind := range []padlocktest.Kind{padlocktest.Redis, padlocktest.Etcd} {
		srv, err := padlocktest.New(ctx, kind)
		if err != nil {
			fmt.Println(err)
			return
		}
		l, err := padlock.Open(ctx, srv.URL())
		if err != nil {
			fmt.Println(err)
			return
		}
		lock, err := l.Lock(ctx, "orders/42")
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: holding %s, token above zero: %v\n", kind, lock.Name(), lock.Token() > 0)
		lock.Unlock(ctx)
		l.Close()
		srv.Close()
	}
	// Output:
	// redis: holding orders/42, token above zero: true
	// etcd: holding orders/42, token above zero: true
}

// A client of its own path to the server: cut it, and the client's lock
// is lost while the server goes on serving everyone else.
func ExampleServer_Proxy() {
	ctx := context.Background()
	srv, err := padlocktest.New(ctx, padlocktest.Redis)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	p, err := padlocktest.NewProxy(srv.Addrs()) // Server.Proxy(t) in a test
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	l, err := padlock.Open(ctx, srv.URLVia(p)+"/?ttl=1s")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	lock, err := l.Lock(ctx, "leader")
	if err != nil {
		fmt.Println(err)
		return
	}
	p.Cut()
	<-lock.Done() // the renewals fail; the lock is lost before its TTL ends
	fmt.Println("lost:", lock.Err() != nil)
	// Output: lost: true
}
