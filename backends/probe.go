package backends

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// Probe dials addrs (host:port) over TCP, each for at most half a second,
// and returns nil as soon as one accepts a connection, or every dial error
// joined. Drivers whose client library keeps the dial error to itself (or
// waits for a connection without saying why) use it to tell an outage, with
// its cause, from a slow server.
func Probe(ctx context.Context, addrs []string) error {
	var errs []error
	for _, a := range addrs {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		c, err := (&net.Dialer{}).DialContext(pctx, "tcp", a)
		cancel()
		if err == nil {
			c.Close()
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

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
