package redis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	"github.com/padlock-go/padlock/padlocktest"
)

// What the conformance suite cannot see of RedLock's WatchHolders (which it
// checks on three masters with notifications on): the masters without
// notifications, a master down when the watch starts, and one that goes
// away while it is up.

// Masters that send no keyspace notifications: ErrUnsupported, saying
// what to turn on, and an inspector polls.
func TestRedLockWatchHoldersNeedsKeyspaceEvents(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := padlock.Open(ctx, masters5.URL()+"/?prefix=nowatch")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ch, err := l.WatchHolders(ctx, "")
	if !errors.Is(err, padlock.ErrUnsupported) || !strings.Contains(err.Error(), "notify-keyspace-events") {
		t.Fatalf("WatchHolders over masters without keyspace notifications = %v, %v; want ErrUnsupported naming notify-keyspace-events", ch, err)
	}
}

// A master down when the watch starts: ErrUnavailable (not ErrUnsupported:
// the server did not say it sends nothing), and a watch once it is back. A
// master that goes away while the watch is up is subscribed again when it
// returns (its PUBSUB NUMPAT, read by an administrator, counts the
// pattern again), and the watch signals each change meanwhile from the
// others, which hold a quorum.
func TestRedLockWatchHoldersAcrossAMasterOutage(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := padlocktest.New(ctx, padlocktest.RedLock, padlocktest.Nodes(3), keyspace)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	nodes := srv.Nodes()
	url := srv.URL() + "/?prefix=watch&ttl=3s"
	w, err := padlock.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	a, err := padlock.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	if err := nodes[0].Kill(); err != nil {
		t.Fatal(err)
	}
	if ch, err := w.WatchHolders(ctx, ""); !errors.Is(err, padlock.ErrUnavailable) {
		t.Fatalf("WatchHolders with a master down = %v, %v; want ErrUnavailable", ch, err)
	}
	if err := nodes[0].Start(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	ch, err := w.WatchHolders(wctx, "")
	if err != nil {
		t.Fatalf("WatchHolders with every master back: %v", err)
	}
	conformance.Signal(t, ch, "the watch is up", 30*time.Second)

	admin := goredis.NewClient(&goredis.Options{Addr: nodes[2].Addr})
	defer admin.Close()
	if err := nodes[2].Kill(); err != nil {
		t.Fatal(err)
	}
	// Signals pending from before (the outage's) are taken, then each
	// change must bring its own.
	seen := func(what string, ok func([]padlock.Holder) bool) {
		t.Helper()
		conformance.SeenHolders(ctx, t, ch, w, "", what, 30*time.Second, ok)
	}
	conformance.Drain(ch)
	lk, err := a.Lock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	seen("a grant on two of three masters", func(hs []padlock.Holder) bool { return len(hs) == 1 && hs[0].Token == lk.Token() })

	if err := nodes[2].Start(ctx); err != nil {
		t.Fatal(err)
	}
	padlocktest.WaitFor(t, "the master back after its outage subscribed again (PUBSUB NUMPAT)", time.Minute, func() bool {
		n, err := admin.PubSubNumPat(ctx).Result()
		return err == nil && n >= 1
	})
	conformance.Drain(ch)
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	seen("the release", func(hs []padlock.Holder) bool { return len(hs) == 0 })

	stop()
	conformance.Closed(t, ch, "its context's end", 30*time.Second)
}
