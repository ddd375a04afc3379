package padlocktest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Main is the TestMain of a package that tests against real servers. It
// starts them with start, runs the tests, stops the servers, and fails the run if a goroutine outlived the tests.
//
// If start fails because a server is not installed (ErrMissing), the tests
// still run and skip what needs that server, unless RequireServers says a
// missing server is a failure. Any other start failure fails the run. start
// must return a stop function that undoes whatever it started, even when it
// also returns an error.
func Main(m *testing.M, start func(ctx context.Context) (stop func(), err error)) {
	os.Exit(run(m, start))
}

func run(m *testing.M, start func(ctx context.Context) (stop func(), err error)) int {
	ignore := append([]goleak.Option{goleak.IgnoreCurrent()}, LeakIgnores()...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	stopServers, err := start(ctx)
	cancel()
	stop := func() {}
	if stopServers != nil {
		stop = sync.OnceFunc(stopServers)
	}
	defer stop()
	if err != nil && (RequireServers() || !errors.Is(err, ErrMissing)) {
		fmt.Fprintln(os.Stderr, "test servers:", err)
		return 1
	}
	code := m.Run()
	stop() // before the leak check: servers' log readers end with them
	if code == 0 {
		if err := findLeaks(ignore); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

// leakGrace is how long a goroutine may outlive the tests before it
// counts as leaked. Client libraries end some goroutines on their own
// schedule: go-redis's pool, after a run of failed dials, probes its
// server once a second until it sees that its pool closed.
const leakGrace = 10 * time.Second

// findLeaks is goleak.Find, given leakGrace for the goroutines to end.
func findLeaks(ignore []goleak.Option) error {
	deadline := time.Now().Add(leakGrace)
	for {
		err := goleak.Find(ignore...) // retries for about a second itself
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}

// LeakIgnores names the goroutines of the harness's own tooling, which leak
// checks of padlock leave alone: a restarted server process's log reader,
// and toxiproxy's link goroutines, which can stay blocked on a channel
// after their proxy closes (a toxiproxy behaviour, seen under load).
func LeakIgnores() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/padlock-go/padlock/padlocktest.(*process).Start.func1"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).write"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"),
	}
}
