package mysqlpg_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/mysqlpg"
)

// Open a PostgreSQL Locker in lease mode and take a lock. (This example
// needs a database, so go test compiles it but does not run it; the
// conformance suite runs the same paths against PostgreSQL and MariaDB.)
func Example() {
	ctx := context.Background()
	locker, err := padlock.Open(ctx, "postgres://app:secret@db:5432/orders?table=padlock_locks&ttl=15s")
	if err != nil {
		log.Fatal(err) // errors.Is(err, padlock.ErrUnavailable) if the database does not answer
	}
	defer locker.Close()

	lk, err := locker.Lock(ctx, "orders/42", padlock.WithWait(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer lk.Unlock(ctx)
	// The token is the name's counter in the lock table: it rises with
	// every grant, also across database restarts.
	fmt.Println("holding orders/42 with fencing token", lk.Token())
}

// Make the lock table ahead of time, with a user that may run DDL, so that
// the application's own user needs only SELECT, INSERT and UPDATE on it.
func ExampleMigrate() {
	ctx := context.Background()
	url := "mysql://deploy:secret@db:3306/orders?table=padlock_locks"
	ddl, err := mysqlpg.Schema(url) // to review it first
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ddl)
	if err := mysqlpg.Migrate(ctx, url); err != nil {
		log.Fatal(err)
	}
}
