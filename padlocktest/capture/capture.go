//go:build unix

// Package capture captures what a piece of code writes to the process's
// standard error, file descriptor 2, where client libraries and servers
// embedded in the process write: tests use it to check that padlock writes
// nothing there.
package capture

import (
	"io"
	"os"
	"syscall"
	"testing"
)

// Stderr returns what f writes to file descriptor 2.
func Stderr(t testing.TB, f func()) string {
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
		r.Close()
		out <- string(b)
	}()
	syscall.Dup2(int(w.Fd()), 2)
	restore := func() {
		syscall.Dup2(saved, 2)
		syscall.Close(saved)
		w.Close()
	}
	restored := false
	defer func() {
		if !restored { // f failed the test: give stderr back all the same
			restore()
		}
	}()
	f()
	restored = true
	restore()
	return <-out
}
