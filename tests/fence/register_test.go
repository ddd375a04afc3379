package fence_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/padlock-go/padlock/fence"
)

// register is one store's fenced register under test: a value per
// resource, written only through the store's fence helper.
type register struct {
	// write sets resource's value under token, through the helper.
	write func(ctx context.Context, resource string, token uint64, value int64) error
	// read returns resource's value, 0 if never written.
	read func(ctx context.Context, resource string) (int64, error)
}

// checkBasics checks one resource's refusals and acceptances in order.
func checkBasics(t *testing.T, r register, resource string) {
	t.Helper()
	ctx := context.Background()
	steps := []struct {
		token uint64
		value int64
		stale bool
	}{{5, 1, false}, {5, 2, false}, {7, 3, false}, {6, 4, true}, {1, 5, true}, {7, 6, false}, {8, 7, false}}
	want := int64(0)
	for _, s := range steps {
		err := r.write(ctx, resource, s.token, s.value)
		if s.stale {
			var se *fence.StaleError
			if !errors.Is(err, fence.ErrStale) || !errors.As(err, &se) || se.Token != s.token || se.Highest != 7 || se.Resource != resource {
				t.Errorf("write(token %d) = %v, want a StaleError for %q, token %d, highest 7", s.token, err, resource, s.token)
			}
		} else if err != nil {
			t.Errorf("write(token %d) = %v, want it accepted", s.token, err)
		} else {
			want = s.value
		}
		if got, err := r.read(ctx, resource); err != nil || got != want {
			t.Errorf("after write(token %d): value %d, %v; want %d", s.token, got, err, want)
		}
	}
}

// The register's sequential specification, for porcupine: a write whose
// token is at least the highest so far is accepted and sets the value and
// the highest; a lower one is refused and changes nothing; a read returns
// the value.
type regState struct {
	highest uint64
	value   int64
}

type regInput struct {
	read  bool
	token uint64
	value int64
}

type regOutput struct {
	stale bool  // a write refused
	value int64 // a read's value
}

var registerModel = porcupine.Model{
	Init: func() any { return regState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(regState), input.(regInput), output.(regOutput)
		switch {
		case in.read:
			return out.value == s.value, s
		case in.token < s.highest:
			return out.stale, s
		default:
			return !out.stale, regState{highest: in.token, value: in.value}
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		if in.read {
			return fmt.Sprintf("read → %d", out.value)
		}
		return fmt.Sprintf("write(token %d, %d) → stale %v", in.token, in.value, out.stale)
	},
}

// checkConcurrent runs writers with interleaved tokens (each picks a token
// at or a little below a shared epoch that they also raise, so that stale,
// equal and newer tokens all meet) and readers on one resource, and checks
// the history against registerModel. Any error but a refusal fails.
func checkConcurrent(t *testing.T, r register, resource string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const clients, opsEach = 4, 30
	var epoch atomic.Uint64
	epoch.Store(3)
	start := time.Now()
	var mu sync.Mutex
	var ops []porcupine.Operation
	var stale, accepted atomic.Int64
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 28))
			for i := range opsEach {
				in := regInput{read: i%4 == 3}
				if !in.read {
					if rng.IntN(3) == 0 {
						epoch.Add(1)
					}
					in.token = epoch.Load() - uint64(rng.IntN(3))
					in.value = int64(c*1000 + i + 1)
				}
				call := time.Since(start).Nanoseconds()
				var out regOutput
				var err error
				if in.read {
					out.value, err = r.read(ctx, resource)
				} else {
					err = r.write(ctx, resource, in.token, in.value)
					out.stale = errors.Is(err, fence.ErrStale)
					if out.stale {
						err = nil
						stale.Add(1)
					} else if err == nil {
						accepted.Add(1)
					}
				}
				ret := time.Since(start).Nanoseconds()
				if err != nil {
					t.Errorf("client %d op %d: %v", c, i, err)
					return
				}
				mu.Lock()
				ops = append(ops, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if res := porcupine.CheckOperations(registerModel, ops); !res {
		t.Errorf("the history of %d operations is not a fencing register's", len(ops))
	}
	if stale.Load() == 0 || accepted.Load() == 0 {
		t.Errorf("%d writes refused, %d accepted: the run did not interleave tokens", stale.Load(), accepted.Load())
	}
	t.Logf("%d writes accepted, %d refused as stale", accepted.Load(), stale.Load())
}
