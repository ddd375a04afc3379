package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/etcd"
	_ "github.com/padlock-go/padlock/memory"
)

// Open an etcd Locker by URL and take a lock, waiting at most five seconds.
// (The examples that need an etcd server are compiled by go test but not
// run; the conformance suite runs the same paths against one, and
// Example_unitTests runs them on mem://.)
func Example() {
	ctx := context.Background()
	locker, err := padlock.Open(ctx, "etcd://127.0.0.1:2379/myapp/locks?ttl=10s")
	if err != nil {
		log.Fatal(err) // errors.Is(err, padlock.ErrUnavailable) if no server answers
	}
	defer locker.Close()

	lk, err := locker.Lock(ctx, "orders/42", padlock.WithWait(5*time.Second))
	if err != nil {
		log.Fatal(err) // errors.Is(err, padlock.ErrTimeout) if someone held it all along
	}
	defer lk.Unlock(ctx)
	fmt.Println("holding orders/42 with fencing token", lk.Token())
}

// Build a Locker over a client the application already has; closing the
// Locker leaves the client open.
func ExampleNew() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()

	locker, err := etcd.New(ctx, cli, "/myapp/locks", padlock.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	lk, err := locker.TryLock(ctx, "nightly-report")
	if err != nil {
		log.Println("someone else runs the report:", err) // errors.Is(err, padlock.ErrNotAcquired)
		return
	}
	defer lk.Unlock(ctx)
	select {
	case <-lk.Done():
		log.Println("lost the lock:", lk.Err())
	case <-time.After(time.Second): // the work
	}
}

// Over TLS, with etcd's user authentication: the CA and the client's own
// certificate from files, the password from a file so that it is not in
// the URL. A refused password or missing permission on the prefix is
// padlock.ErrAccessDenied.
func Example_tls() {
	ctx := context.Background()
	locker, err := padlock.Open(ctx, "etcds://padlock@etcd1:2379,etcd2:2379,etcd3:2379/myapp/locks"+
		"?ca=/etc/padlock/ca.pem&cert=/etc/padlock/client.pem&key=/etc/padlock/client-key.pem"+
		"&password_file=/run/secrets/etcd-padlock")
	if err != nil {
		log.Fatal(err) // errors.Is(err, padlock.ErrAccessDenied) for a wrong password
	}
	defer locker.Close()
	lk, err := locker.Lock(ctx, "orders/42")
	if err != nil {
		log.Fatal(err)
	}
	defer lk.Unlock(ctx)
}

// Code that locks through etcd in production takes a *padlock.Locker, so
// that its unit tests can give it one on mem://, the in-process backend,
// which keeps etcd's promises within one process: exclusion, tokens that
// rise from holder to holder, waiters served in arrival order. Only the
// URL differs.
func Example_unitTests() {
	ctx := context.Background()
	url := "mem://etcd-example?ttl=10s" // production: etcd://127.0.0.1:2379/myapp/locks?ttl=10s
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

	first, err := a.Lock(ctx, "orders/42", padlock.WithWait(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	_, err = b.TryLock(ctx, "orders/42")
	fmt.Println("taken while held:", !errors.Is(err, padlock.ErrNotAcquired))
	if err := first.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	second, err := b.Lock(ctx, "orders/42", padlock.WithWait(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer second.Unlock(ctx)
	fmt.Println("token rose:", second.Token() > first.Token())
	caps := b.Capabilities()
	fmt.Println("fair, monotonic:", caps.FairFIFO, caps.MonotonicTokens)
	// Output:
	// taken while held: false
	// token rose: true
	// fair, monotonic: true true
}
