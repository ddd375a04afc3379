package driverkit_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

var errDown = errors.New("server down")

// The janitor runs in a synctest bubble: its backoff and request bounds
// run on the bubble's clock, and synctest.Wait returns once every task is
// blocked on a timer or a channel, so each check below sees the janitor
// at rest rather than at a moment picked by a sleep.

func TestJanitorRetriesUntilDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := driverkit.NewJanitor()
		defer j.Close(context.Background())
		var attempts atomic.Int32
		start := time.Now()
		var took time.Duration
		j.Go(func(context.Context) error {
			if attempts.Add(1) < 4 {
				return errDown
			}
			took = time.Since(start)
			return nil
		})
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := attempts.Load(); n != 4 {
			t.Fatalf("%d attempts, want 4: three failures, retried, then a success that ends the task", n)
		}
		// Backoff between attempts: at least half of 50ms, 100ms, 200ms.
		if took < 175*time.Millisecond {
			t.Errorf("four attempts took %v: the retries do not back off", took)
		}
	})
}

func TestJanitorStopsOnFinalErrors(t *testing.T) {
	for _, final := range []error{backends.ErrNotHeld, backends.ErrAccessDenied} {
		t.Run(fmt.Sprint(final), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				j := driverkit.NewJanitor()
				defer j.Close(context.Background())
				var attempts atomic.Int32
				j.Go(func(context.Context) error {
					attempts.Add(1)
					return fmt.Errorf("release: %w", final) // wrapped, as drivers return it
				})
				time.Sleep(time.Hour)
				synctest.Wait()
				if n := attempts.Load(); n != 1 {
					t.Errorf("%d attempts after %v, want 1: no retry mends it", n, final)
				}
			})
		})
	}
}

func TestJanitorBoundsEachAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := driverkit.NewJanitor()
		defer j.Close(context.Background())
		causes := make(chan error, 2)
		start := time.Now()
		var ended time.Duration
		attempt := 0 // the task's attempts run one after another
		j.Go(func(ctx context.Context) error {
			attempt++
			<-ctx.Done() // a server that never answers
			if attempt == 1 {
				ended = time.Since(start)
			}
			causes <- context.Cause(ctx)
			if attempt == 2 {
				return nil
			}
			return ctx.Err()
		})
		for range 2 {
			if cause := <-causes; !errors.Is(cause, driverkit.ErrNoAnswer) {
				t.Errorf("an attempt ended with %v, want ErrNoAnswer", cause)
			}
		}
		if ended != driverkit.DefaultRequestTimeout {
			t.Errorf("the first attempt ended after %v, want DefaultRequestTimeout (%v)", ended, driverkit.DefaultRequestTimeout)
		}
	})
}

func TestJanitorClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := driverkit.NewJanitor()
		var cause error
		j.Go(func(ctx context.Context) error {
			<-ctx.Done()
			cause = context.Cause(ctx)
			return ctx.Err()
		})
		retrying := atomic.Int32{}
		j.Go(func(context.Context) error {
			retrying.Add(1)
			return errDown
		})
		synctest.Wait()
		select {
		case <-j.Done():
			t.Fatal("Done closed before Close")
		default:
		}
		if err := j.Close(context.Background()); err != nil {
			t.Fatalf("Close = %v", err)
		}
		// Close cancelled the attempt in flight and waited for it, and
		// stopped the retries.
		if !errors.Is(cause, context.Canceled) {
			t.Errorf("the attempt in flight ended with %v, want Canceled by Close", cause)
		}
		n := retrying.Load()
		time.Sleep(time.Hour)
		if retrying.Load() != n {
			t.Error("a task was retried after Close")
		}
		select {
		case <-j.Done():
		default:
			t.Error("Done is open after Close")
		}
		if j.Go(func(context.Context) error { t.Error("a task ran after Close"); return nil }) {
			t.Error("Go after Close reported true")
		}
	})
}

func TestJanitorCloseBoundedByContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := driverkit.NewJanitor()
		release := make(chan struct{})
		j.Go(func(context.Context) error { <-release; return nil }) // ignores its context
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := j.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close with a task that ignores its context = %v, want the context's DeadlineExceeded", err)
		}
		close(release)
	})
}

func TestJanitorSettle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := driverkit.NewJanitor()
		defer j.Close(context.Background())

		// A healthy server: Settle returns once the first attempt has.
		start := time.Now()
		var done atomic.Bool
		j.Settle(func(context.Context) error {
			time.Sleep(30 * time.Millisecond)
			done.Store(true)
			return nil
		})
		if !done.Load() || time.Since(start) != 30*time.Millisecond {
			t.Errorf("Settle returned after %v, done=%v; want after the first attempt (30ms)", time.Since(start), done.Load())
		}

		// A silent server: Settle returns after CleanupWait; the task goes on.
		start = time.Now()
		var attempts atomic.Int32
		j.Settle(func(ctx context.Context) error {
			if attempts.Add(1) == 1 {
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		})
		if got := time.Since(start); got != driverkit.CleanupWait {
			t.Errorf("Settle on a silent server returned after %v, want CleanupWait (%v)", got, driverkit.CleanupWait)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := attempts.Load(); n != 2 {
			t.Errorf("%d attempts, want 2: the silent first, retried in the background", n)
		}
	})
}
