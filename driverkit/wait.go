package driverkit

import (
	"context"
	"sync"
)

// Wait waits for wg, or for ctx, whichever comes first, and returns ctx's
// error in the second case. What wg counts may then still be running (a
// call that ignores its context); the caller decides what to do about it.
func Wait(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
