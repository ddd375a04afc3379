package driverkit_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

func TestWithRequestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, c := range []struct{ d, want time.Duration }{
			{0, driverkit.DefaultRequestTimeout},
			{-time.Second, driverkit.DefaultRequestTimeout},
			{300 * time.Millisecond, 300 * time.Millisecond},
		} {
			start := time.Now()
			ctx, cancel := driverkit.WithRequestTimeout(context.Background(), c.d)
			<-ctx.Done()
			cancel()
			if got := time.Since(start); got != c.want {
				t.Errorf("WithRequestTimeout(%v) ended after %v, want %v", c.d, got, c.want)
			}
			if !errors.Is(context.Cause(ctx), driverkit.ErrNoAnswer) || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				t.Errorf("WithRequestTimeout(%v): cause %v, err %v; want ErrNoAnswer, DeadlineExceeded", c.d, context.Cause(ctx), ctx.Err())
			}
		}
		// A caller's earlier deadline still ends it first, with the caller's cause.
		parent, cancelParent := context.WithTimeout(context.Background(), time.Second)
		defer cancelParent()
		ctx, cancel := driverkit.WithRequestTimeout(parent, 0)
		defer cancel()
		<-ctx.Done()
		if errors.Is(context.Cause(ctx), driverkit.ErrNoAnswer) {
			t.Errorf("a caller's 1s deadline ended as the request bound: %v", context.Cause(ctx))
		}
	})
}

func TestRequestError(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	if driverkit.RequestError(context.Background(), "x", nil) != nil {
		t.Error("RequestError(nil) is not nil")
	}

	// A failure while the caller's context lives: an outage, cause kept.
	err := driverkit.RequestError(context.Background(), "etcd acquire", refused)
	var op *net.OpError
	if !errors.Is(err, backends.ErrUnavailable) || !errors.As(err, &op) || !strings.Contains(err.Error(), "etcd acquire") {
		t.Errorf("RequestError(live ctx, refused) = %v, want ErrUnavailable with the *net.OpError and what failed", err)
	}

	// The caller gave up first: its own error, not an outage.
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	err = driverkit.RequestError(cancelled, "etcd acquire", io.EOF)
	if !errors.Is(err, context.Canceled) || errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("RequestError(cancelled ctx) = %v, want context.Canceled and not ErrUnavailable", err)
	}

	// The request bound fired: the server did not answer, an outage.
	synctest.Test(t, func(t *testing.T) {
		bounded, cancel := driverkit.WithRequestTimeout(context.Background(), time.Second)
		defer cancel()
		<-bounded.Done()
		err := driverkit.RequestError(bounded, "etcd acquire", bounded.Err())
		if !errors.Is(err, backends.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("RequestError(request bound) = %v, want ErrUnavailable and DeadlineExceeded", err)
		}
	})
}

func TestUnavailable(t *testing.T) {
	if driverkit.Unavailable("x", nil) != nil {
		t.Error("Unavailable(nil) is not nil")
	}
	cause := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	err := driverkit.Unavailable("redis ping", cause)
	var op *net.OpError
	if !errors.Is(err, backends.ErrUnavailable) || !errors.As(err, &op) || op != cause {
		t.Errorf("Unavailable = %v, want ErrUnavailable with its cause reachable", err)
	}
	if want := "padlock: backend unavailable: redis ping: dial tcp: connection refused"; err.Error() != want {
		t.Errorf("Unavailable says %q, want %q", err, want)
	}
	// Classified once: wrapping an outage again adds context, not a second class.
	again := driverkit.Unavailable("open", err)
	if n := strings.Count(again.Error(), "backend unavailable"); n != 1 || !errors.As(again, &op) {
		t.Errorf("Unavailable(Unavailable) = %q: the class %d times", again, n)
	}
}

func TestWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var wg sync.WaitGroup
		release := make(chan struct{})
		wg.Go(func() { <-release })

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := driverkit.Wait(ctx, &wg); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Wait on a running task = %v, want the context's DeadlineExceeded", err)
		}
		close(release)
		if err := driverkit.Wait(context.Background(), &wg); err != nil {
			t.Errorf("Wait on a finished task = %v", err)
		}
	})
}
