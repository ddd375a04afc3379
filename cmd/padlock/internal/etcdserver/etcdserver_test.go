package etcdserver

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// captureStderr returns what f writes to file descriptor 2, where zap and
// etcd write.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved, err := syscall.Dup(2)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		out <- string(b)
	}()
	syscall.Dup2(int(w.Fd()), 2)
	f()
	syscall.Dup2(saved, 2)
	syscall.Close(saved)
	w.Close()
	return <-out
}

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
	out := captureStderr(t, func() {
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
