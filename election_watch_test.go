package padlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/backends"
)

// closingWatcher is a driver whose Watch ends at once (its channel
// closed, against Watcher's contract) and whose Leader counts its calls.
type closingWatcher struct{ reads atomic.Int64 }

func (d *closingWatcher) Acquire(context.Context, backends.Request) (backends.Hold, error) {
	return nil, errors.New("not used")
}

func (d *closingWatcher) Capabilities() backends.Capabilities {
	return backends.Capabilities{Elections: true, MinTTL: time.Millisecond}
}

func (d *closingWatcher) Close(context.Context) error { return nil }

func (d *closingWatcher) Leader(context.Context, string) (backends.Leader, bool, error) {
	d.reads.Add(1)
	return backends.Leader{}, false, nil
}

func (d *closingWatcher) Watch(context.Context, string) (<-chan struct{}, error) {
	ch := make(chan struct{})
	close(ch)
	return ch, nil
}

// Observe over a watch that ended early polls, as without one: it does
// not read the leader again and again on the closed channel. (It did: a
// tight loop of reads.) With a TTL of an hour, the poll is every 20
// minutes, so in the test's window only the first read happens.
func TestObserveWatchEndedEarly(t *testing.T) {
	d := &closingWatcher{}
	l, err := padlock.NewLocker(d, padlock.WithTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	obs := l.Election("e").Observe(ctx)
	if ld := <-obs; ld != (padlock.Leader{}) {
		t.Fatalf("first Observe value %+v, want no leader", ld)
	}
	// A window in which a tight loop would read thousands of times.
	time.Sleep(200 * time.Millisecond)
	cancel()
	for range obs {
	}
	if n := d.reads.Load(); n > 2 {
		t.Errorf("Observe read the leader %d times in 200ms over a closed watch, want 1 (the first read) until the next poll", n)
	}
}
