package driverkit

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/padlock-go/padlock/backends"
)

// Janitor removes state that must not outlive its use (a cancelled
// waiter's queue entry, a key whose write had an unknown outcome, a lost
// hold) in the background, so that no caller ever waits for cleanup. Each
// task is retried with backoff until it succeeds, reports
// backends.ErrNotHeld (the state is gone already) or
// backends.ErrAccessDenied (no retry will mend it; what is left goes when
// its session or lease ends), or the Janitor closes; each attempt is
// bounded by DefaultRequestTimeout. Drivers and the portable layer each
// own one.
type Janitor struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool
}

// NewJanitor returns a running Janitor; Close stops it.
func NewJanitor() *Janitor {
	ctx, cancel := context.WithCancel(context.Background())
	return &Janitor{ctx: ctx, cancel: cancel}
}

// cleanupBackoff paces the retries of a task against an unreachable server.
var cleanupBackoff = backends.ExponentialBackoff(50*time.Millisecond, 5*time.Second)

// CleanupWait is how long Settle lets its caller wait for the first attempt
// of a cleanup: long enough for a healthy server, so that a cancelled wait
// has left its queue before the call returns, and short enough that an
// outage never holds a caller up.
const CleanupWait = time.Second

// Go runs task in the background until it returns nil or an error
// matching backends.ErrNotHeld or backends.ErrAccessDenied, retrying other
// errors. The ctx a task gets ends at its attempt's bound or when the
// Janitor closes. Go reports false, and runs nothing, once Close has
// begun.
func (j *Janitor) Go(task func(ctx context.Context) error) bool {
	return j.start(task, nil)
}

// Settle is Go, but waits up to CleanupWait for the task's first attempt,
// so that on a healthy server the state is gone when Settle returns.
func (j *Janitor) Settle(task func(ctx context.Context) error) {
	j.SettleAll(task)
}

// SettleAll is Settle for several tasks (the clean-up of each name of a
// multi-lock): they run side by side, and the caller waits up to
// CleanupWait in all for their first attempts, not CleanupWait each, so
// an outage holds a caller up by one CleanupWait whatever the count.
func (j *Janitor) SettleAll(tasks ...func(ctx context.Context) error) {
	firsts := make([]chan struct{}, 0, len(tasks))
	for _, task := range tasks {
		first := make(chan struct{})
		if !j.start(task, first) {
			break // closing: nothing more runs
		}
		firsts = append(firsts, first)
	}
	if len(firsts) == 0 {
		return
	}
	t := time.NewTimer(CleanupWait)
	defer t.Stop()
	for _, first := range firsts {
		select {
		case <-first:
		case <-t.C:
			return
		}
	}
}

func (j *Janitor) start(task func(ctx context.Context) error, first chan struct{}) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return false
	}
	j.wg.Go(func() {
		for attempt := 0; ; attempt++ {
			ctx, cancel := WithRequestTimeout(j.ctx, 0)
			err := task(ctx)
			cancel()
			if first != nil {
				close(first)
				first = nil
			}
			if err == nil || errors.Is(err, backends.ErrNotHeld) || errors.Is(err, backends.ErrAccessDenied) {
				return
			}
			t := time.NewTimer(cleanupBackoff.NextBackoff(attempt))
			select {
			case <-j.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	})
	return true
}

// Retry is Go for a task whose first attempt has just failed (a release
// the caller tried itself): it waits one back-off before trying again,
// rather than asking an unreachable server again at once.
func (j *Janitor) Retry(task func(ctx context.Context) error) bool {
	waited := false
	return j.Go(func(ctx context.Context) error {
		if !waited {
			waited = true // the attempts run one after another: no race
			t := time.NewTimer(cleanupBackoff.NextBackoff(0))
			defer t.Stop()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			}
		}
		return task(ctx)
	})
}

// Done is closed when the Janitor starts closing; tasks that wait for
// something before their first attempt select on it.
func (j *Janitor) Done() <-chan struct{} { return j.ctx.Done() }

// Close stops retrying, cancels the attempts in flight and waits for them,
// or for ctx. What was not cleaned up by then is left to the server's lease.
func (j *Janitor) Close(ctx context.Context) error {
	j.mu.Lock()
	j.closed = true
	j.mu.Unlock()
	j.cancel()
	return Wait(ctx, &j.wg)
}
