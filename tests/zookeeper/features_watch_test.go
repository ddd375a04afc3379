package zookeeper_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
)

// WatchHolders on ZooKeeper follows the tree with one-shot watches. It is
// up before the lock root exists (an exists watch on the root), and
// signals the grant that makes the root and the name's container. After
// its session expires it sets every watch again on a new session, says so
// with a signal, and signals the changes after that.
func TestWatchHoldersFollowsTree(t *testing.T) {
	needServers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h := newHarness(t, single, "")
	t.Cleanup(func() { h.Close() })
	a, b := h.open(t, ctx), h.open(t, ctx)
	// names waits for signals on ch until Holders under "app/" names want:
	// a signal may be spurious, a change must bring one.
	names := func(ch <-chan struct{}, l *padlock.Locker, what string, want ...string) {
		t.Helper()
		conformance.SeenHolders(ctx, t, ch, l, "app/", what, 30*time.Second, func(hs []padlock.Holder) bool {
			var got []string
			for _, h := range hs {
				got = append(got, h.Name)
			}
			return slices.Equal(got, want)
		})
	}
	up := func(ch <-chan struct{}, what string) {
		t.Helper()
		conformance.Signal(t, ch, what, 30*time.Second)
	}

	// Before the root exists.
	w1 := h.open(t, ctx)
	wctx, stop := context.WithCancel(ctx)
	ch, err := w1.WatchHolders(wctx, "app/")
	if err != nil {
		t.Fatal(err)
	}
	up(ch, "the watch is up, with no root yet")
	x, err := a.Lock(ctx, "app/x")
	if err != nil {
		t.Fatal(err)
	}
	names(ch, w1, "the grant that made the root", "app/x")
	stop()

	// Across an expiry of the watch's session: the watch reads on the
	// session of w's hold, of the suite's short lease.
	w := h.open(t, ctx)
	if _, err := w.Lock(ctx, "other/held"); err != nil {
		t.Fatal(err)
	}
	ch, err = w.WatchHolders(ctx, "app/")
	if err != nil {
		t.Fatal(err)
	}
	up(ch, "the watch is up")
	restore, err := h.Blackhole(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	// b is granted w's name once the server has expired w's session.
	held, err := b.Lock(ctx, "other/held", padlock.WithWait(time.Minute))
	if err != nil {
		t.Fatalf("w's session never expired: %v", err)
	}
	defer held.Unlock(ctx)
	for range len(ch) {
		<-ch // signals of the outage's start, if any
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	up(ch, "the watch is up again on a new session")
	y, err := b.Lock(ctx, "app/y")
	if err != nil {
		t.Fatal(err)
	}
	names(ch, w, "a grant after the expiry", "app/x", "app/y")
	if err := x.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	names(ch, w, "a release after the expiry", "app/y")
	if err := y.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
