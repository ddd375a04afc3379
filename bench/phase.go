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
)

// ErrViolation is a benchmark run that broke mutual exclusion or token
// order: an error, not a result.
var ErrViolation = errors.New("bench: safety violated")

// sample is one acquisition, its times since the phase began. asked is
// when the client first asked: a wait that a peer abandons by its own rule
// (and asks again) counts whole.
type sample struct {
	client, key               int
	asked, got, freed, relEnd time.Duration // freed: the release is called
}

// phase is what one run of one implementation on one cell measured.
type phase struct {
	samples []sample
	// window is the span over which rates are taken: the turn's duration
	// (grants after it, while the clients drain, are not counted in rates),
	// or with a limit the whole run.
	window time.Duration
	gaveUp int64 // waits a client abandoned by its own rule (redsync's tries), then asked again
	// most is the most holds of one name at once (R1, S1), raced the
	// observed values received before their Proclaim returned (E1).
	most, raced int
	rts         int64
	client      time.Duration // CPU
	server      time.Duration // CPU; -1: not measured
}

// minGrace is the least time a waiter is given, after the turn ends, to
// get the lock.
var minGrace = 30 * time.Second

// errStuck is a waiter that did not get the lock within the grace after
// the turn ended: a lost wake-up or a deadlock, a failure of the
// implementation.
var errStuck = errors.New("a waiter was still blocked long after the turn ended")

// runPhase runs load on clients for d and checks, at every acquisition,
// that nobody else holds the name and that its token rose.
//
// With limit > 0 it ends after limit acquisitions instead (for go test
// -bench's b.N), with d only bounding the wait for stragglers.
//
// When the phase fails, or a waiter is still blocked long after the end,
// it closes the clients, so that a client library that ignores contexts
// (zk.Lock) lets go of its goroutine.
func runPhase(ctx context.Context, im Impl, clients []Client, rt *Counter, load Load, names []string, d time.Duration, limit int64, pids []int, seed uint64) (*phase, error) {
	holders := make([]atomic.Int64, load.Keys)
	for i := range holders {
		holders[i].Store(-1)
	}
	tokens := make([]atomic.Uint64, load.Keys)
	// R1 and S1 share names: each name's holds are counted by kind.
	shared := load.Workload == R1 || load.Workload == S1
	occ := make([]occupancy, load.Keys)
	grace := max(minGrace, 10*d)
	lctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
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
		cancel(err)
	}
	// The servers' reading sweeps /proc: done before the client's is
	// taken, so that its own CPU is not the turn's.
	srv0 := serversCPU(pids)
	rts0, cpu0 := rt.Load(), clientCPU()
	start := time.Now()
	// The watchdog: a waiter still blocked at d + grace fails the phase.
	finished := make(chan struct{})
	watchdog := make(chan struct{})
	go func() {
		defer close(watchdog)
		t := time.NewTimer(d + grace)
		defer t.Stop()
		select {
		case <-finished:
			return
		case <-t.C:
			fail(fmt.Errorf("%s: %w (%v)", im.Name, errStuck, grace))
		case <-lctx.Done():
		}
		for _, c := range clients {
			c.Close()
		}
	}()
	for i, c := range clients {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		pick := keyPicker(r, load, i)
		// R1's readers are drawn from a stream of their own: the same for
		// every implementation, whatever the key choice drew.
		readers := rand.New(rand.NewPCG(seed, uint64(i)|1<<32))
		acquire, err := acquirer(load, c, i)
		if err != nil {
			fail(err)
			break
		}
		wg.Go(func() {
			more := func() bool {
				if limit > 0 {
					return started.Add(1) <= limit
				}
				return time.Since(start) < d
			}
			for lctx.Err() == nil && more() {
				k := pick()
				reader := load.Readers > 0 && readers.Float64() < load.Readers
				var ended uint64
				if shared {
					ended = occ[k].endedToken()
				}
				asked := time.Since(start)
				var h Held
				var kind holdKind
				for {
					var err error
					h, kind, err = acquire(lctx, names[k], reader)
					if err == nil {
						break
					}
					switch {
					case lctx.Err() != nil:
						return
					case im.GivesUp && gaveUpErr(err):
						gaveUp.Add(1)
						continue // the application would ask again
					}
					fail(fmt.Errorf("%s: lock %q: %w", im.Name, names[k], err))
					return
				}
				got := time.Since(start)
				if shared {
					if err := occ[k].enter(kind, im.Tokens, h.Token, ended); err != nil {
						fail(fmt.Errorf("%w: %s: client %d on %q: %w", ErrViolation, im.Name, i, names[k], err))
					}
				} else {
					if prev := holders[k].Swap(int64(i)); prev != -1 {
						fail(fmt.Errorf("%w: %s: client %d was granted %q while client %d held it", ErrViolation, im.Name, i, names[k], prev))
					}
					// tokens hold each name's last token + 1; 0: none yet.
					if last := tokens[k].Swap(h.Token + 1); im.Tokens && last != 0 && h.Token+1 <= last {
						fail(fmt.Errorf("%w: %s: %q granted with token %d after token %d", ErrViolation, im.Name, names[k], h.Token, last-1))
					}
				}
				pause(load.Hold)
				freed := time.Since(start)
				if shared {
					occ[k].leave(kind)
				} else {
					holders[k].CompareAndSwap(int64(i), -1)
				}
				if err := h.Release(lctx); err != nil {
					if lctx.Err() == nil {
						fail(fmt.Errorf("%s: release %q: %w", im.Name, names[k], err))
					}
					return
				}
				if shared {
					occ[k].ended(h.Token)
				}
				per[i] = append(per[i], sample{client: i, key: k, asked: asked, got: got, freed: freed, relEnd: time.Since(start)})
				pause(load.Think)
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	close(finished)
	<-watchdog
	p := &phase{window: d, gaveUp: gaveUp.Load()}
	for i := range occ {
		p.most = max(p.most, occ[i].most)
	}
	if limit > 0 {
		p.window = wall
	}
	p.rts, p.client = rt.Load()-rts0, clientCPU()-cpu0
	p.server = -1
	if pids != nil {
		p.server = serversCPU(pids) - srv0
	}
	if len(failures) > 0 {
		return nil, errors.Join(failures...)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
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

// gaveUpErr says whether err is redsync giving up by its own rule (its
// bounded tries), which the benchmark counts instead of failing, for the
// implementations that say they give up.
func gaveUpErr(err error) bool {
	var taken *redsync.ErrTaken
	var nodeTaken *redsync.ErrNodeTaken
	return errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) || errors.As(err, &nodeTaken)
}

// handoffs returns the hand-off times of samples: for each grant of a
// name to a client that was already waiting when the previous holder (a
// different client) called its release, the time from that release
// returning to the grant returning. A grant that returned before the
// release did (the waiter was woken before the holder heard back) counts
// as zero, and raced counts them.
func handoffs(samples []sample, keys int) (hs []handoff, raced int) {
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
			hs = append(hs, handoff{fromReturn: d, fromCall: s.got - prev.freed})
		}
	}
	return hs, raced
}

// handoff is one hand-off, timed from the release returning (as the
// benchmark issue defines it; 0 when the grant returned first) and from
// the release being called (never negative: it includes the release's own
// round trip).
type handoff struct{ fromReturn, fromCall time.Duration }
