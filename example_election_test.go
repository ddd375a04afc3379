package padlock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/padlock-go/padlock"
)

// Campaign blocks until elected; the Leadership's Done closes if the term
// is lost, before anyone else can be elected. Others read the leader's
// value with Leader.
func ExampleElection_Campaign() {
	ctx := context.Background()
	a, _ := padlock.Open(ctx, "mem://example-election")
	b, _ := padlock.Open(ctx, "mem://example-election")
	defer a.Close()
	defer b.Close()

	ld, err := a.Election("scheduler").Campaign(ctx, "10.0.0.7:8080")
	if err != nil {
		panic(err)
	}
	leader, _ := b.Election("scheduler").Leader(ctx)
	fmt.Println("leader:", leader.Value, leader.Token == ld.Token())

	ld.Proclaim(ctx, "10.0.0.7:9090")
	leader, _ = b.Election("scheduler").Leader(ctx)
	fmt.Println("proclaimed:", leader.Value)

	ld.Resign(ctx)
	_, err = b.Election("scheduler").Leader(ctx)
	fmt.Println("after Resign:", errors.Is(err, padlock.ErrNoLeader))
	// Output:
	// leader: 10.0.0.7:8080 true
	// proclaimed: 10.0.0.7:9090
	// after Resign: true
}

// Observe sends the leader now, then every change, the latest first.
func ExampleElection_Observe() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, _ := padlock.Open(ctx, "mem://example-observe")
	defer a.Close()

	changes := a.Election("scheduler").Observe(ctx)
	fmt.Printf("%q\n", (<-changes).Value) // no leader yet
	ld, _ := a.Election("scheduler").Campaign(ctx, "node-1")
	fmt.Printf("%q\n", (<-changes).Value)
	ld.Resign(ctx)
	fmt.Printf("%q\n", (<-changes).Value) // no leader again
	// Output:
	// ""
	// "node-1"
	// ""
}
