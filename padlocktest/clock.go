package padlocktest

import (
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

// fakeClockSource is the library's source.
//
//go:embed fakeclock/fakeclock.c
var fakeClockSource []byte

// fakeClock is a node's wall clock, moved by the fakeclock library that is
// preloaded into its process (fakeclock/fakeclock.c). The library reads
// its settings from file, mapped into memory, at every clock call. Only
// the wall clock moves (CLOCK_REALTIME, as an NTP step or a bad oscillator
// would move it); the monotonic clock stays true.
type fakeClock struct {
	mu   sync.Mutex
	file *os.File
	seq  uint64
}

// newFakeClock makes the clock of a node whose files live in dir, and
// returns the environment that puts the node's process under it.
func newFakeClock(dir string) (*fakeClock, []string, error) {
	lib, err := fakeClockLib()
	if err != nil {
		return nil, nil, err
	}
	path := filepath.Join(dir, "fakeclock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, nil, err
	}
	c := &fakeClock{file: f}
	if err := c.write(0, 0, 1); err != nil {
		f.Close()
		return nil, nil, err
	}
	return c, []string{"LD_PRELOAD=" + lib, "PADLOCK_FAKECLOCK_FILE=" + path}, nil
}

// reset sets the clock to the true time, for a process about to start.
func (c *fakeClock) reset() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.write(0, 0, 1)
}

// set makes the clock read now+offset from now on, advancing rate seconds
// per real second.
func (c *fakeClock) set(offset time.Duration, rate float64) error {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return fmt.Errorf("%w: clock rate %v: want a positive number", ErrInvalid, rate)
	}
	if offset > 100*365*24*time.Hour || offset < -100*365*24*time.Hour {
		return fmt.Errorf("%w: clock offset %v: more than a century", ErrInvalid, offset)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now().UnixNano()
	return c.write(now, now+int64(offset), rate)
}

// write publishes new settings under the sequence number: odd while they
// change, so that a reader never uses half of them. c.seq stays even
// between writes; a write that fails puts the even number back, so that
// no reader waits on a change that will never finish.
func (c *fakeClock) write(baseReal, baseFake int64, rate float64) error {
	var b [32]byte
	binary.LittleEndian.PutUint64(b[:8], c.seq+1)
	binary.LittleEndian.PutUint64(b[8:], uint64(baseReal))
	binary.LittleEndian.PutUint64(b[16:], uint64(baseFake))
	binary.LittleEndian.PutUint64(b[24:], math.Float64bits(rate))
	_, err := c.file.WriteAt(b[:8], 0)
	if err == nil {
		_, err = c.file.WriteAt(b[8:], 8)
	}
	next := c.seq + 2
	if err != nil {
		next = c.seq // the old settings, whole or not, are what stays
	}
	binary.LittleEndian.PutUint64(b[:8], next)
	if _, werr := c.file.WriteAt(b[:8], 0); werr != nil && err == nil {
		err = werr
	}
	if err == nil {
		c.seq = next
	}
	return err
}

func (c *fakeClock) close() { c.file.Close() }

// The library, built once per process into the user's cache directory,
// under a name that is the hash of its source.
var fakeLib struct {
	once sync.Once
	path string
	err  error
}

func fakeClockLib() (string, error) {
	fakeLib.once.Do(func() {
		cc, err := exec.LookPath("cc")
		if err != nil {
			if cc, err = exec.LookPath("gcc"); err != nil {
				fakeLib.err = fmt.Errorf("%w: a C compiler (cc), which builds the FakeClock library (Debian package gcc)", ErrMissing)
				return
			}
		}
		dir, err := cacheDir()
		if err != nil {
			fakeLib.err = err
			return
		}
		sum := sha256.Sum256(fakeClockSource)
		path := filepath.Join(dir, fmt.Sprintf("fakeclock-%x.so", sum[:8]))
		if _, err := os.Stat(path); err == nil {
			fakeLib.path = path
			return
		}
		src, err := os.CreateTemp(dir, "fakeclock-*.c")
		if err != nil {
			fakeLib.err = err
			return
		}
		defer os.Remove(src.Name())
		_, err = src.Write(fakeClockSource)
		if cerr := src.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			fakeLib.err = err
			return
		}
		tmp := path + fmt.Sprintf(".%d.tmp", os.Getpid())
		defer os.Remove(tmp)
		if out, err := exec.Command(cc, "-shared", "-fPIC", "-O2", "-Wall", "-o", tmp, src.Name()).CombinedOutput(); err != nil {
			fakeLib.err = fmt.Errorf("cc fakeclock.c: %v\n%s", err, out)
			return
		}
		fakeLib.path, fakeLib.err = path, os.Rename(tmp, path)
	})
	return fakeLib.path, fakeLib.err
}

// SetClock sets a node's wall clock, on a server started with FakeClock:
// from now on it reads the true time plus offset and advances rate seconds
// per real second (1: at the true pace). SetClock(10*time.Second, 1) is a
// jump ten seconds forward; SetClock(0, 2) a clock that runs twice as fast
// from the true time on. A node that starts again starts with the true
// time. On other servers it returns ErrUnsupported.
func (n *Node) SetClock(offset time.Duration, rate float64) error {
	p, ok := n.ops.(interface{ proc() *process })
	if !ok || p.proc().clock == nil {
		return fmt.Errorf("%w: SetClock on a node without FakeClock", ErrUnsupported)
	}
	return p.proc().clock.set(offset, rate)
}
