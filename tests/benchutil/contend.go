// Package benchutil holds what padlock's benchmarks share: a contention
// loop that measures hand-off latency, the time from the moment one client
// calls its release (so the release's own round trip counts) to the moment
// another client's acquisition of the same lock returns.
package benchutil

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
)

// Acquire takes the lock for one client and returns its release.
type Acquire func(client int) (release func() error, err error)

// Contend runs b.N acquisitions of one lock split over clients (the first
// b.N%clients clients take one more), each held
// for hold (simulated work, so that the others are queued when it ends). It
// reports ns/op and, as custom metrics, the median and 99th percentile
// hand-off latency and the share of acquisitions that changed hands.
func Contend(b *testing.B, clients int, hold time.Duration, acquire Acquire) {
	var (
		mu          sync.Mutex
		lastHolder  = -1
		lastRelease time.Time
		handoffs    []time.Duration
		wg          sync.WaitGroup
	)
	b.ResetTimer()
	for c := range clients {
		n := b.N / clients
		if c < b.N%clients {
			n++
		}
		wg.Go(func() {
			for range n {
				release, err := acquire(c)
				if err != nil {
					b.Error(err)
					return
				}
				now := time.Now()
				mu.Lock()
				if lastHolder >= 0 && lastHolder != c {
					handoffs = append(handoffs, now.Sub(lastRelease))
				}
				mu.Unlock()
				time.Sleep(hold)
				// Stamped as release is called: the hand-off includes it.
				mu.Lock()
				lastHolder, lastRelease = c, time.Now()
				mu.Unlock()
				if err := release(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if len(handoffs) == 0 {
		return
	}
	slices.Sort(handoffs)
	b.ReportMetric(float64(handoffs[len(handoffs)/2].Microseconds()), "handoff-p50-µs")
	b.ReportMetric(float64(handoffs[len(handoffs)*99/100].Microseconds()), "handoff-p99-µs")
	b.ReportMetric(float64(len(handoffs))/float64(b.N), "handoff-share")
}

// Open opens a Locker for a benchmark and closes it when the benchmark ends.
func Open(b *testing.B, url string) *padlock.Locker {
	b.Helper()
	l, err := padlock.Open(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}
