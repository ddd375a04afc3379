package mysqlpg_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/padlock-go/padlock"
	_ "github.com/padlock-go/padlock/memory"
	"github.com/padlock-go/padlock/mysqlpg"
)

// Open a PostgreSQL Locker in lease mode and take a lock. (The examples
// that need a database are compiled by go test but not run; the
// conformance suite runs the same paths against PostgreSQL and MariaDB,
// and Example_unitTests runs them on mem://.)
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

// Schema returns the lock table's DDL without connecting, to review
// before Migrate (or padlock migrate) runs it.
func ExampleSchema() {
	ddl, err := mysqlpg.Schema("mysql://deploy@db:3306/orders?table=padlock_locks")
	if err != nil {
		log.Fatal(err)
	}
	for _, line := range strings.Split(ddl, "\n") {
		if strings.HasPrefix(line, "CREATE") {
			fmt.Println(line)
		}
	}
	// Output: CREATE TABLE IF NOT EXISTS `padlock_locks` (
}

// Make the lock table ahead of time, with a user that may run DDL, so that
// the application's own user needs only SELECT, INSERT and UPDATE on it.
func ExampleMigrate() {
	ctx := context.Background()
	if err := mysqlpg.Migrate(ctx, "mysql://deploy:secret@db:3306/orders?table=padlock_locks"); err != nil {
		log.Fatal(err) // errors.Is(err, padlock.ErrAccessDenied) for a user without DDL rights
	}
}

// Code that locks through PostgreSQL in production takes a
// *padlock.Locker, so that its unit tests can give it one on mem://, the
// in-process backend. The fencing token goes with every write, and the
// storage refuses one older than the last it saw: a holder that lost its
// lock without knowing cannot overwrite its successor.
func Example_unitTests() {
	ctx := context.Background()
	url := "mem://sql-example?ttl=15s" // production: postgres://app@db:5432/orders?table=padlock_locks&password_file=/run/secrets/db
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

	var lastToken uint64 // the storage's record of the newest token it saw
	write := func(token uint64) bool {
		if token < lastToken {
			return false
		}
		lastToken = token
		return true
	}
	old, err := a.Lock(ctx, "orders/42", padlock.WithWait(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	old.Unlock(ctx) // as if its lease had run out while its holder was paused
	next, err := b.Lock(ctx, "orders/42", padlock.WithWait(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer next.Unlock(ctx)
	fmt.Println("new holder writes:", write(next.Token()))
	fmt.Println("old holder writes:", write(old.Token()))
	// Output:
	// new holder writes: true
	// old holder writes: false
}
