package mysqlpg_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/mysqlpg"
	"github.com/padlock-go/padlock/padlocktest"
)

// MySQL's waiting writers queue on the server (mysqlpg's queue.go), in
// lease and advisory mode, so a holder that locks again right after its
// release cannot pass them by.
// Four clients each hold one name for 20ms and lock it again at once,
// with a minute's lease (no wait may end by a lease running out). With
// waiters that poll, the releasing client won nearly every race; with the
// queue each client, on its release, joins the back of the queue, and the
// name goes round: every client gets its share of the acquisitions, in
// turn.
func TestQueueNoStarvation(t *testing.T) {
	srv := servers(t)[1]
	for _, mode := range []string{mysqlpg.ModeLease, mysqlpg.ModeAdvisory} {
		t.Run(mode, func(t *testing.T) { testQueueNoStarvation(t, srv, mode) })
	}
}

func testQueueNoStarvation(t *testing.T, srv server, mode string) {
	const clients, each = 4, 6
	h := newHarness(t, srv, mode)
	defer h.Close()
	ctx := context.Background()
	var (
		mu    sync.Mutex
		order []int // who acquired, in order
	)
	// The first acquisition is taken before the others start, so that
	// all of them find the name held and queue.
	lockers := make([]*padlock.Locker, clients)
	for i := range lockers {
		lockers[i] = h.open(t, padlock.WithTTL(time.Minute))
	}
	first, err := lockers[0].Lock(ctx, "round")
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, clients)
	gate := make(chan struct{}) // client 0 keeps its first hold until all others queue
	var started sync.WaitGroup
	for i, l := range lockers {
		started.Add(1)
		go func() {
			var lk *padlock.Lock
			if i == 0 {
				lk = first
			}
			started.Done()
			for n := range each {
				if lk == nil {
					var err error
					if lk, err = l.Lock(ctx, "round", padlock.WithWait(60*time.Second)); err != nil {
						errs <- fmt.Errorf("client %d, acquisition %d: %w", i, n, err)
						return
					}
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				if i == 0 && n == 0 {
					<-gate
				}
				time.Sleep(20 * time.Millisecond) // the critical section
				if err := lk.Unlock(ctx); err != nil {
					errs <- err
					return
				}
				lk = nil
			}
			errs <- nil
		}()
	}
	started.Wait()
	// One of the others heads the queue (it polls the row); the rest wait
	// in GET_LOCK for the queue lock.
	padlocktest.WaitFor(t, "the other clients queued", 30*time.Second, func() bool {
		return inQueue(t, h) == clients-2
	})
	close(gate)
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// In turn: between two acquisitions of one client, every other client
	// that still had acquisitions to make got one. (A client that has made
	// its last leaves the round.)
	var b strings.Builder
	for _, c := range order {
		fmt.Fprint(&b, c)
	}
	t.Logf("order of acquisitions: %s", b.String())
	done := make([]int, clients)
	last := make([]int, clients) // index in order of each client's latest acquisition
	for i := range last {
		last[i] = -1
	}
	for k, c := range order {
		if last[c] >= 0 {
			for other := range clients {
				if other != c && done[other] < each && last[other] < last[c] {
					t.Fatalf("client %d acquired twice (places %d and %d) while client %d, queued, got none: %s",
						c, last[c], k, other, b.String())
				}
			}
		}
		done[c]++
		last[c] = k
	}
	if n := inQueue(t, h); n != 0 {
		t.Errorf("%d connections still wait in a queue", n)
	}
}

// inQueue counts the connections that wait in GET_LOCK for a queue lock.
func inQueue(t *testing.T, h *harness) int {
	var n int
	err := h.admin.QueryRowContext(context.Background(),
		`SELECT count(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE '%GET_LOCK(''padlock-q:%' AND ID <> CONNECTION_ID()`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
