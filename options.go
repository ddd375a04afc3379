package padlock

import (
	"fmt"
	"time"

	"github.com/padlock-go/padlock/backends"
)

const (
	// DefaultTTL is the lease a hold gets unless WithTTL or ?ttl= says
	// otherwise. Ten seconds lets a crashed client's locks free up quickly
	// while leaving the watchdog, which renews at TTL/3, two more tries
	// after a missed renewal before the hold is given up.
	DefaultTTL = 10 * time.Second

	// DefaultWait is the wait bound of Lock: zero, which means Lock waits
	// until it holds the lock or its context is done.
	DefaultWait time.Duration = 0

	// MinTTL is the shortest TTL accepted. Below it the safety margin and
	// the renewal period leave too little time for a round trip.
	MinTTL = 200 * time.Millisecond
)

// DefaultRetry is the polling schedule of backends that cannot be woken by
// their server: exponential from 10ms to 500ms with jitter.
var DefaultRetry = ExponentialBackoff(10*time.Millisecond, 500*time.Millisecond)

// Option changes one setting of an acquisition, or of every acquisition when
// passed to Open.
type Option func(*settings) error

type settings struct {
	ttl   time.Duration
	wait  time.Duration
	retry Retry
}

func defaultSettings() settings {
	return settings{ttl: DefaultTTL, wait: DefaultWait, retry: DefaultRetry}
}

// apply returns a copy of s with opts applied; s is never changed.
func (s settings) apply(opts []Option) (settings, error) {
	for _, o := range opts {
		if o == nil {
			return s, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		if err := o(&s); err != nil {
			return s, err
		}
	}
	return s, nil
}

// WithTTL sets the lease of a hold. The watchdog renews it at TTL/3 for as
// long as the lock is held; TTL only bounds how long a crashed holder blocks
// others. It must be at least MinTTL. A backend may raise it to its own
// minimum (etcd grants whole seconds of at least its minimum lease).
func WithTTL(ttl time.Duration) Option {
	return func(s *settings) error {
		if ttl < MinTTL {
			return fmt.Errorf("%w: ttl %v is shorter than the minimum %v", ErrInvalidOption, ttl, MinTTL)
		}
		s.ttl = ttl
		return nil
	}
}

// WithWait bounds how long Lock waits for the lock; it then fails with an
// error matching both ErrTimeout and context.DeadlineExceeded. Zero means no
// bound beyond the context. TryLock never waits, whatever this says.
func WithWait(wait time.Duration) Option {
	return func(s *settings) error {
		if wait < 0 {
			return fmt.Errorf("%w: wait %v is negative", ErrInvalidOption, wait)
		}
		s.wait = wait
		return nil
	}
}

// WithRetry sets the polling schedule for backends that must poll. Backends
// with push wake-ups (etcd watches, Redis pub/sub) ignore it.
func WithRetry(r Retry) Option {
	return func(s *settings) error {
		if r == nil {
			return fmt.Errorf("%w: nil Retry", ErrInvalidOption)
		}
		s.retry = r
		return nil
	}
}

// Retry paces the attempts of a backend that has to poll; see
// backends.Retry for the contract.
type Retry = backends.Retry

// NoRetry never retries: a polling backend gives up after one attempt.
func NoRetry() Retry { return backends.NoRetry() }

// LinearBackoff polls at a fixed interval.
func LinearBackoff(every time.Duration) Retry { return backends.LinearBackoff(every) }

// ExponentialBackoff polls with a doubling, jittered interval from min to max.
func ExponentialBackoff(min, max time.Duration) Retry { return backends.ExponentialBackoff(min, max) }

// LimitRetry stops r after max attempts.
func LimitRetry(r Retry, max int) Retry { return backends.LimitRetry(r, max) }
