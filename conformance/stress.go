package conformance

import (
	"sync"

	"github.com/padlock-go/padlock"
)

// failures collects what the goroutines of a stress subtest found, to
// report from the test's goroutine once they are done.
type failures struct {
	mu   sync.Mutex
	errs []error
}

func (f *failures) add(err error) {
	f.mu.Lock()
	f.errs = append(f.errs, err)
	f.mu.Unlock()
}

// report fails e with every error collected.
func (f *failures) report(e *env) {
	e.Helper()
	for _, err := range f.errs {
		e.Error(err)
	}
}

// raise sets a to v if v is greater: a high-water mark that goroutines
// share (the greatest token of a hold that ended, the most holders seen at
// once).
func raise[T int64 | uint64](a interface {
	Load() T
	CompareAndSwap(old, new T) bool
}, v T) {
	for m := a.Load(); v > m && !a.CompareAndSwap(m, v); m = a.Load() {
	}
}

// lockersN opens n independent Lockers (see env.locker).
func (e *env) lockersN(n int) []*padlock.Locker {
	e.Helper()
	ls := make([]*padlock.Locker, n)
	for i := range ls {
		ls[i] = e.locker()
	}
	return ls
}
