package padlocktest

import (
	"bytes"
	"io"
	"os"
	"sync"
)

// ProgressEnv names the file that Progress appends to. A test runner that
// shows only whole packages as they finish (scripts/test, through
// gotestsum) sets it and prints the file as it grows, so that a package
// that runs for minutes shows that it is alive.
const ProgressEnv = "PADLOCK_PROGRESS"

// Progress returns a writer that appends each complete line written to
// it, after prefix, to the file ProgressEnv names; without one it
// discards them. Lines from many processes interleave whole (each is one
// append). It never fails its writer: progress is best effort.
func Progress(prefix string) io.Writer {
	path := os.Getenv(ProgressEnv)
	if path == "" {
		return io.Discard
	}
	return &progress{path: path, prefix: prefix}
}

type progress struct {
	path, prefix string
	mu           sync.Mutex
	buf          []byte
}

func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := append([]byte(p.prefix), p.buf[:i+1]...)
		p.buf = p.buf[i+1:]
		if f, err := os.OpenFile(p.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
			f.Write(line)
			f.Close()
		}
	}
}
