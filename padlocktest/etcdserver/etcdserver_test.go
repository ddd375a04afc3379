package etcdserver

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/padlock-go/padlock/padlocktest/capture"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// A normal start and shutdown logs nothing: etcd reports every listener it
// closes as an error with a stack trace, which Close silences.
func TestShutdownIsQuiet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var startErr error
	out := capture.Stderr(t, func() {
		var s *Server
		s, startErr = Start(ctx, Config{Name: "q", Dir: t.TempDir(),
			ClientURL: fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", freePort(t))})
		if startErr == nil {
			s.Close()
		}
	})
	if startErr != nil {
		t.Fatal(startErr)
	}
	if strings.TrimSpace(out) != "" {
		t.Errorf("start and shutdown wrote to stderr:\n%s", out)
	}
}
