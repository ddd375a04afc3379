package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"

	"github.com/padlock-go/padlock"
)

// ErrViolation is a benchmark run that broke mutual exclusion or token
// order: an error, not a result.
var ErrViolation = errors.New("bench: safety violated")

// sample is one acquisition, its times since the phase began.
type sample struct {
	client, key               int
	asked, got, freed, relEnd time.Duration // freed: the release is called
}

// phase is what one run of one implementation on one cell measured.
type phase struct {
	samples []sample
	wall    time.Duration
	gaveUp  int64 // acquisitions the client itself gave up (redsync's tries)
	rts     int64
	client  time.Duration // CPU
	server  time.Duration // CPU
}

// runPhase runs load on clients for d and checks, at every acquisition,
// that nobody else holds the name and that its token rose.
//
// With limit > 0 it ends after limit acquisitions instead (for go test
// -bench's b.N), with d only bounding the wait for stragglers.
func runPhase(ctx context.Context, im Impl, clients []Client, rt *Counter, load Load, names []string, d time.Duration, limit int64, pids []int, seed uint64) (*phase, error) {
	holders := make([]atomic.Int64, load.Keys)
	for i := range holders {
		holders[i].Store(-1)
	}
	tokens := make([]atomic.Uint64, load.Keys)
	// A waiter still blocked when the phase ends is let finish; one that
	// cannot within the grace is a failure of the implementation.
	lctx, cancel := context.WithTimeout(ctx, d+max(30*time.Second, 10*d))
	defer cancel()
	var (
		mu       sync.Mutex
		failures []error
		gaveUp   atomic.Int64
		started  atomic.Int64
		wg       sync.WaitGroup
		per      = make([][]sample, len(clients))
	)
	fail := func(err error) {
		mu.Lock()
		failures = append(failures, err)
		mu.Unlock()
		cancel()
	}
	rts0, cpu0, srv0 := rt.Load(), clientCPU(), processCPU(pids)
	start := time.Now()
	for i, c := range clients {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		pick := keyPicker(r, load, i)
		wg.Go(func() {
			more := func() bool {
				if limit > 0 {
					return started.Add(1) <= limit
				}
				return time.Since(start) < d
			}
			for lctx.Err() == nil && more() {
				k := pick()
				asked := time.Since(start)
				h, err := c.Lock(lctx, names[k])
				got := time.Since(start)
				if err != nil {
					switch {
					case lctx.Err() != nil:
						return
					case gaveUpErr(err):
						gaveUp.Add(1)
						continue
					}
					fail(fmt.Errorf("%s: lock %q: %w", im.Name, names[k], err))
					return
				}
				if prev := holders[k].Swap(int64(i)); prev != -1 {
					fail(fmt.Errorf("%w: %s: client %d was granted %q while client %d held it", ErrViolation, im.Name, i, names[k], prev))
				}
				// tokens hold each name's last token + 1; 0: none yet.
				if last := tokens[k].Swap(h.Token + 1); im.Tokens && last != 0 && h.Token+1 <= last {
					fail(fmt.Errorf("%w: %s: %q granted with token %d after token %d", ErrViolation, im.Name, names[k], h.Token, last-1))
				}
				pause(load.Hold)
				freed := time.Since(start)
				holders[k].CompareAndSwap(int64(i), -1)
				if err := h.Release(lctx); err != nil {
					fail(fmt.Errorf("%s: release %q: %w", im.Name, names[k], err))
					return
				}
				per[i] = append(per[i], sample{client: i, key: k, asked: asked, got: got, freed: freed, relEnd: time.Since(start)})
				pause(load.Think)
			}
		})
	}
	wg.Wait()
	p := &phase{wall: time.Since(start), gaveUp: gaveUp.Load()}
	p.rts, p.client, p.server = rt.Load()-rts0, clientCPU()-cpu0, processCPU(pids)-srv0
	if len(failures) > 0 {
		return nil, errors.Join(failures...)
	}
	for _, s := range per {
		p.samples = append(p.samples, s...)
	}
	return p, nil
}

// keyPicker returns client i's choice of name for each acquisition.
func keyPicker(r *rand.Rand, load Load, i int) func() int {
	switch {
	case load.Keys == 1:
		return func() int { return 0 }
	case load.Theta > 0:
		z := newZipf(r, load.Keys, load.Theta)
		return z.next
	case load.Keys == load.Clients:
		return func() int { return i }
	default:
		return func() int { return r.IntN(load.Keys) }
	}
}

// pause sleeps for d, if any.
func pause(d time.Duration) {
	if d > 0 {
		time.Sleep(d)
	}
}

// gaveUpErr says whether err is a client giving up by its own rule (a
// peer's bounded tries), which the benchmark counts instead of failing.
func gaveUpErr(err error) bool {
	var taken *redsync.ErrTaken
	var nodeTaken *redsync.ErrNodeTaken
	return errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) || errors.As(err, &nodeTaken) ||
		errors.Is(err, padlock.ErrNotAcquired)
}

// handoffs returns the hand-off times of samples: for each grant of a
// name to a client that was already waiting when the previous holder (a
// different client) called its release, the time from that release
// returning to the grant returning. A grant that returned before the
// release did (the waiter was woken before the holder heard back) counts
// as zero, and raced counts them.
func handoffs(samples []sample, keys int) (ds []time.Duration, raced int) {
	byKey := make([][]sample, keys)
	for _, s := range samples {
		byKey[s.key] = append(byKey[s.key], s)
	}
	for _, ss := range byKey {
		slices.SortFunc(ss, func(a, b sample) int { return int(a.got - b.got) })
		for i := 1; i < len(ss); i++ {
			prev, s := ss[i-1], ss[i]
			if s.client == prev.client || s.asked >= prev.freed {
				continue
			}
			d := s.got - prev.relEnd
			if d < 0 {
				raced++
				d = 0
			}
			ds = append(ds, d)
		}
	}
	return ds, raced
}
