package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
)

// TestOnlySlow: a round whose missing answers all ran out of time (a
// loaded host) is retried; one with a refusal or another failure is an
// outage, reported at once.
func TestOnlySlow(t *testing.T) {
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		name string
		rs   []reply
		want bool
	}{
		{"all answered", []reply{{v: 1}, {v: 0}, {v: 1}}, true},
		{"deadline", []reply{{v: 1}, {err: context.DeadlineExceeded}, {err: fmt.Errorf("redis: %w", context.DeadlineExceeded)}}, true},
		{"i/o timeout", []reply{{v: 1}, {err: timeout}, {v: 0}}, true},
		{"refused", []reply{{v: 1}, {err: refused}, {err: timeout}}, false},
		{"other", []reply{{v: 1}, {err: errors.New("NOSCRIPT")}, {v: 1}}, false},
	} {
		if got := onlySlow(c.rs); got != c.want {
			t.Errorf("%s: onlySlow = %v, want %v", c.name, got, c.want)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestBrokenConn: a replica round is sent again on a fresh connection only
// when its connection broke under it; a timeout or a server's answer ends
// it.
func TestBrokenConn(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{errors.New("redis: Conn is in a bad state: read tcp 127.0.0.1:1->127.0.0.1:2: use of closed network connection"), true},
		{fmt.Errorf("read: %w", net.ErrClosed), true},
		{&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true},
		{context.DeadlineExceeded, false},
		{&net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}, false},
		{errors.New("NOREPLICAS Not enough good replicas to write."), false},
	} {
		if got := brokenConn(c.err); got != c.want {
			t.Errorf("brokenConn(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
