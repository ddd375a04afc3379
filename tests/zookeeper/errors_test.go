package zookeeper_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/padlock-go/padlock"
)

// A server that takes connections but grants no session (here a paused
// one: the kernel still accepts its connections) is ErrUnavailable with a
// message that says so. It said "%!w(<nil>)": the probe that names a
// refused connection found nothing wrong, and its nil was wrapped.
func TestOpenNoSession(t *testing.T) {
	needServers(t)
	if err := single.Pause(); err != nil {
		t.Fatal(err)
	}
	defer single.Resume()
	l, err := padlock.Open(context.Background(), "zk://"+single.Addrs()+"/nosession?dial_timeout=1s")
	if err == nil {
		l.Close()
		t.Fatal("Open succeeded against a paused server")
	}
	if !errors.Is(err, padlock.ErrUnavailable) || strings.Contains(err.Error(), "%!") || !strings.Contains(err.Error(), "no session") {
		t.Errorf("Open against a paused server: %v, want ErrUnavailable saying no session was granted", err)
	}
}
