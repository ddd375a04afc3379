package etcd_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
)

func TestOpenErrors(t *testing.T) {
	conformance.CheckOpenErrors(t, []conformance.OpenCase{
		{URL: "etcd://127.0.0.1:1/p?bogus=1", Want: padlock.ErrInvalidOption, Msg: `"bogus" for etcd:// (known: ttl, wait, dial_timeout, request_timeout, password_file, password_env, ca, cert, key, server_name)`},
		{URL: "etcds://127.0.0.1:1/p?bogus=1", Want: padlock.ErrInvalidOption, Msg: `"bogus" for etcds://`},
		{URL: "etcds://127.0.0.1:1/p?ca=/nonexistent/ca.pem", Want: padlock.ErrInvalidOption, Msg: "ca=/nonexistent/ca.pem"},
		{URL: "etcds://127.0.0.1:1/p?key=/tmp/k.pem", Want: padlock.ErrInvalidOption, Msg: "cert= and key= go together"},
		{URL: "etcd://u:s3cret@127.0.0.1:1/p?password_env=PW", Want: padlock.ErrInvalidOption, Msg: "at once"},
		{URL: "etcd://:s3cret@127.0.0.1:1/p", Want: padlock.ErrInvalidURL, Msg: "a password without a user"},
		// Over TLS too, a refused port is the dial error, at once.
		{URL: "etcds://127.0.0.1:1/p", Want: padlock.ErrUnavailable, Msg: "connection refused"},
		{URL: "etcd://127.0.0.1:1/p?dial_timeout=soon", Want: padlock.ErrInvalidOption, Msg: "dial_timeout"},
		{URL: "etcd://127.0.0.1:1/p?request_timeout=0s", Want: padlock.ErrInvalidOption, Msg: "request_timeout"},
		{URL: "etcd:///p", Want: padlock.ErrInvalidURL, Msg: "host:port"},
		{URL: "etcd://127.0.0.1:1,127.0.0.1:1/p", Want: padlock.ErrInvalidURL, Msg: "appears twice"},
		{URL: "etcd://127.0.0.1:1/p?dial_timeout=200ms", Want: padlock.ErrUnavailable, Msg: "127.0.0.1:1"},
		// The dial error is the cause, reachable with errors.As.
		{URL: "etcd://127.0.0.1:1/p", Want: padlock.ErrUnavailable, Msg: "connection refused"},
		{URL: "etcd://no-such-host.invalid:2379/p", Want: padlock.ErrUnavailable, Msg: "no such host"},
	})
}

// An unreachable endpoint fails Open with the dial error as its cause, at
// once rather than after the dial timeout, whatever the caller's context.
func TestOpenRefusedCause(t *testing.T) {
	_, err := padlock.Open(context.Background(), "etcd://127.0.0.1:1/p?dial_timeout=1m")
	var op *net.OpError
	if !errors.Is(err, padlock.ErrUnavailable) || !errors.As(err, &op) {
		t.Fatalf("Open against a refused port = %v, want ErrUnavailable wrapping a *net.OpError", err)
	}
	if strings.Contains(err.Error(), "deadline") {
		t.Errorf("Open against a refused port waited for its deadline: %v", err)
	}
	// With a one-minute dial timeout, only failing fast can pass this bound.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := padlock.Open(ctx, "etcd://127.0.0.1:1/p?dial_timeout=1m"); ctx.Err() != nil {
		t.Errorf("Open against a refused port waited for the caller's deadline: %v", err)
	}
}

// TestWithDialer opens the etcd client's connections through the
// application's dial function.
func TestWithDialer(t *testing.T) {
	var dials atomic.Int64
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	ctx := context.Background()
	l, err := padlock.Open(ctx, server.URL()+"/dialer", padlock.WithDialer(dial))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lk, err := l.Lock(ctx, "dialed")
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if dials.Load() == 0 {
		t.Error("the dial function was never called")
	}
}
