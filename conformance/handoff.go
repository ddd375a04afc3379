package conformance

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/padlock-go/padlock"
)

// handoffMetric is the histogram of hand-offs between one Locker's holds.
const handoffMetric = "padlock.handoff.duration"

// handoffRounds bounds how many hand-offs testHandoffTimed makes before
// it must have seen one timed. A hand-off goes untimed when the waiter's
// driver cannot prove whom it followed: an etcd waiter whose queue watch
// was still loading at the release, a ZooKeeper waiter whose predecessor
// went before its watch was set. Those are short windows after a waiter
// joins; each round gives the waiter a new one.
const handoffRounds = 20

// testHandoffTimed checks the hand-off metric against what the test
// sees, on a Locker with its own meter provider: a hand-off between two
// of its holds is timed at most once, within the time from the Unlock
// call to the waiter's Lock returning; where the backend has monotonic
// tokens, one of handoffRounds such hand-offs is timed, unless the
// harness declares FeatureSuccessor unsupported (a backend whose holds
// cannot name their predecessor); and a hand-off that another Locker's
// hold came between is never timed as one (in a fair queue, the other
// Locker's waiter, which waited first, must come between).
func testHandoffTimed(e *env) {
	rec := &handoffRecorder{}
	l := e.locker(padlock.WithMeterProvider(rec))
	other := e.locker()
	name := e.name("h")
	seen := rec.seen
	type result struct {
		lk  *padlock.Lock
		err error
		at  time.Time
	}
	// waiter starts a Lock of name on wl and waits until it is seen
	// waiting: another Locker's on the server (with entries there where
	// the backend queues), l's own in this process, parked in its
	// driver's Acquire (a Locker may make its own calls wait at home, as
	// an advisory-lock Locker does behind its own hold).
	waiter := func(wl *padlock.Locker, entries int) <-chan result {
		e.Helper()
		got := make(chan result, 1)
		opt, proof := waitProof()
		before := parkedInAcquire()
		go func() {
			lk, err := wl.Lock(e.ctx, name, opt)
			got <- result{lk, err, time.Now()}
		}()
		if wl != l {
			e.awaitWaiting(wl, proof, entries)
			return got
		}
		WaitFor(e.ctx, e.T, "the Lock call parked in its driver's Acquire", proofWithin, func() bool {
			return parkedInAcquire() > before
		})
		return got
	}
	await := func(got <-chan result, what string) result {
		e.Helper()
		select {
		case r := <-got:
			if r.err != nil {
				e.Fatalf("%s: %v", what, r.err)
			}
			return r
		case <-time.After(proofWithin):
			e.Fatalf("%s: not granted within %v of the release", what, proofWithin)
		}
		return result{}
	}

	held := e.lock(l, e.ctx, name)
	timed := false
	for round := 1; round <= handoffRounds && !timed; round++ {
		got := waiter(l, 2)
		n0, sum0 := seen()
		sent := time.Now()
		e.unlock(held)
		r := await(got, "the waiter of the same Locker")
		window := r.at.Sub(sent)
		n, sum := seen()
		switch d := sum - sum0; {
		case n-n0 > 1:
			e.Fatalf("round %d: one hand-off timed %d times", round, n-n0)
		case n-n0 == 1 && (d <= 0 || d > window):
			e.Fatalf("round %d: hand-off timed as %v; the test saw the Unlock call and the grant %v apart", round, d, window)
		case n-n0 == 1:
			e.Logf("round %d: hand-off timed as %v (Unlock call to Lock return: %v)", round, d, window)
			timed = true
		}
		held = r.lk
	}
	_, noSuccessor := e.unsupported[FeatureSuccessor]
	if !timed && e.caps.MonotonicTokens && !noSuccessor {
		e.Errorf("none of %d hand-offs between holds of one Locker was timed (%s)", handoffRounds, handoffMetric)
	}

	// Another Locker's waiter goes first (in a fair queue; elsewhere it
	// may): a hand-off from l's holder to l's waiter with its hold between
	// is two hand-offs, and must not be timed as one.
	theirs := waiter(other, 2)
	mine := waiter(l, 3)
	n0, sum0 := seen()
	sent := time.Now()
	e.unlock(held)
	var first result
	mineFirst := false
	select {
	case first = <-theirs:
	case first = <-mine:
		mineFirst = true
	case <-time.After(proofWithin):
		e.Fatalf("neither waiter granted within %v of the release", proofWithin)
	}
	if first.err != nil {
		e.Fatalf("first waiter: %v", first.err)
	}
	n1, sum1 := seen()
	e.unlock(first.lk)
	var second result
	if mineFirst {
		second = await(theirs, "the other Locker's waiter")
	} else {
		second = await(mine, "this Locker's waiter, behind the other's")
	}
	n, _ := seen()
	switch {
	case mineFirst && e.caps.FairFIFO:
		e.Errorf("fair queue: this Locker's waiter got the name before the other Locker's, which waited first")
	case !mineFirst && n != n0:
		e.Errorf("a hand-off with another Locker's hold (token %d) between was timed (%d records)", first.lk.Token(), n-n0)
	case mineFirst && n != n1:
		e.Errorf("a hand-off to another Locker was timed (%d records)", n-n1)
	case mineFirst && n1-n0 > 1:
		e.Errorf("one hand-off timed %d times", n1-n0)
	case mineFirst && n1-n0 == 1 && (sum1-sum0 <= 0 || sum1-sum0 > first.at.Sub(sent)):
		e.Errorf("hand-off timed as %v; the test saw the Unlock call and the grant %v apart", sum1-sum0, first.at.Sub(sent))
	}
	e.Logf("this Locker's waiter was first: %v; release to the second grant: %v", mineFirst, second.at.Sub(sent))
	e.unlock(second.lk)
}

// handoffRecorder is a meter provider that keeps the count and sum of
// padlock.handoff.duration and drops every other measurement: the
// OpenTelemetry API's no-op provider with that one histogram recording.
// (The SDK would do as well, but this package is in the library's module,
// whose go.mod keeps to what the library needs.)
type handoffRecorder struct {
	noop.MeterProvider
	mu  sync.Mutex
	n   int
	sum float64 // seconds
}

func (r *handoffRecorder) Meter(string, ...metric.MeterOption) metric.Meter {
	return handoffMeter{r: r}
}

// seen returns the hand-offs recorded so far and their total time.
func (r *handoffRecorder) seen() (int, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n, time.Duration(r.sum * float64(time.Second))
}

type handoffMeter struct {
	noop.Meter
	r *handoffRecorder
}

func (m handoffMeter) Float64Histogram(name string, opts ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	if name != handoffMetric {
		return m.Meter.Float64Histogram(name, opts...)
	}
	return handoffHistogram{r: m.r}, nil
}

type handoffHistogram struct {
	noop.Float64Histogram
	r *handoffRecorder
}

func (h handoffHistogram) Record(_ context.Context, v float64, _ ...metric.RecordOption) {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	h.r.n++
	h.r.sum += v
}

// parkedInAcquire counts the goroutines of this process that are parked
// (on a channel, a condition or the network) inside a driver's Acquire
// called by a Locker: Lock calls that are waiting, past every step of the
// portable layer before the driver's (a reentrant owner's wait, which
// parks on a mutex or a channel before it, is not counted: it holds no
// owner here).
func parkedInAcquire() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		head, _, _ := strings.Cut(g, "\n")
		parked := strings.Contains(head, "[select") || strings.Contains(head, "[chan receive") ||
			strings.Contains(head, "[sync.Cond.Wait") || strings.Contains(head, "[IO wait")
		if parked && strings.Contains(g, "padlock.(*Locker).acquireFromDriver(") {
			n++
		}
	}
	return n
}
