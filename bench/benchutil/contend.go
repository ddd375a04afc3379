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
// b.N%clients clients take one more), each held for hold (simulated work,
// so that the others are queued when it ends). It reports ns/op and, as
// custom metrics, the median and 99th percentile hand-off latency and the
// share of acquisitions that changed hands.
func Contend(b *testing.B, clients int, hold time.Duration, acquire Acquire) {
	ContendLoad(b, Load{Clients: clients, Hold: hold}, acquire)
}

// Load is a contention workload: Clients loop over acquire, hold for Hold,
// release, then think for Think before asking again.
type Load struct {
	Clients     int
	Hold, Think time.Duration
}

// ContendLoad is Contend with think time. Besides Contend's metrics it
// reports the 99th percentile wait (from asking to holding), the median
// release call (the hand-off's own write: hand-off minus release is what
// the wake-up costs), the utilisation (the share of the run during which
// the lock was held) and Jain's fairness index over the clients' total
// waits.
func ContendLoad(b *testing.B, load Load, acquire Acquire) {
	var (
		mu          sync.Mutex
		lastHolder  = -1
		lastRelease time.Time
		handoffs    []time.Duration
		waits       []time.Duration
		releases    []time.Duration
		waitBy      = make([]time.Duration, load.Clients) // total wait per client
		held        time.Duration
		wg          sync.WaitGroup
	)
	b.ResetTimer()
	start := time.Now()
	for c := range load.Clients {
		n := b.N / load.Clients
		if c < b.N%load.Clients {
			n++
		}
		wg.Go(func() {
			for range n {
				asked := time.Now()
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
				waits = append(waits, now.Sub(asked))
				waitBy[c] += now.Sub(asked)
				mu.Unlock()
				time.Sleep(load.Hold)
				// Stamped as release is called: the hand-off includes it.
				mu.Lock()
				lastHolder, lastRelease = c, time.Now()
				held += lastRelease.Sub(now)
				mu.Unlock()
				released := time.Now()
				if err := release(); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				releases = append(releases, time.Since(released))
				mu.Unlock()
				if load.Think > 0 {
					time.Sleep(load.Think)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if len(handoffs) == 0 {
		return
	}
	slices.Sort(handoffs)
	slices.Sort(waits)
	slices.Sort(releases)
	b.ReportMetric(float64(handoffs[len(handoffs)/2].Microseconds()), "handoff-p50-µs")
	b.ReportMetric(float64(handoffs[len(handoffs)*99/100].Microseconds()), "handoff-p99-µs")
	b.ReportMetric(float64(len(handoffs))/float64(b.N), "handoff-share")
	if load.Think > 0 {
		b.ReportMetric(float64(waits[len(waits)*99/100].Microseconds()), "wait-p99-µs")
		b.ReportMetric(float64(releases[len(releases)/2].Microseconds()), "release-p50-µs")
		b.ReportMetric(held.Seconds()/elapsed.Seconds(), "utilisation")
		b.ReportMetric(jain(waitBy), "jain")
	}
}

// jain is Jain's fairness index of xs: 1 when all are equal, 1/len(xs)
// when one client gets everything. Over the clients' total waits (each
// makes the same number of acquisitions) it says whether some clients wait
// much longer than others.
func jain(xs []time.Duration) float64 {
	var sum, sq float64
	for _, x := range xs {
		f := x.Seconds()
		sum += f
		sq += f * f
	}
	if sq == 0 {
		return 1
	}
	return sum * sum / (float64(len(xs)) * sq)
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
