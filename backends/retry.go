package backends

import (
	"math/rand/v2"
	"time"
)

// Retry paces the attempts of a driver that has to poll. It is the fallback:
// drivers with a push wake-up (watch, pub/sub, LISTEN/NOTIFY) do not use it.
type Retry interface {
	// NextBackoff returns how long to wait before the next attempt, or a
	// negative duration to stop trying. Implementations must be safe for
	// concurrent use, since one Retry value is shared by many acquisitions.
	NextBackoff(attempt int) time.Duration
}

// NoRetry never retries.
func NoRetry() Retry { return noRetry{} }

type noRetry struct{}

func (noRetry) NextBackoff(int) time.Duration { return -1 }

// LinearBackoff retries at a fixed interval.
func LinearBackoff(every time.Duration) Retry { return linear(every) }

type linear time.Duration

func (l linear) NextBackoff(int) time.Duration { return time.Duration(l) }

// ExponentialBackoff doubles the wait from min up to max and draws each wait
// from the upper half of that interval (equal jitter), so that pollers do
// not move in lockstep.
func ExponentialBackoff(min, max time.Duration) Retry {
	return &exponential{min: min, max: max}
}

// exponential holds no mutable state; math/rand/v2's global source is safe
// for concurrent use, which makes the strategy race-safe.
type exponential struct{ min, max time.Duration }

func (e *exponential) NextBackoff(attempt int) time.Duration {
	d := e.min
	for i := 0; i < attempt && d < e.max; i++ {
		d *= 2
	}
	if d > e.max {
		d = e.max
	}
	if d <= 0 {
		return 0
	}
	half := d / 2
	return half + rand.N(half+1)
}

// LimitRetry stops after max attempts of the wrapped strategy.
func LimitRetry(r Retry, max int) Retry { return limited{r: r, max: max} }

type limited struct {
	r   Retry
	max int
}

func (l limited) NextBackoff(attempt int) time.Duration {
	if attempt >= l.max {
		return -1
	}
	return l.r.NextBackoff(attempt)
}
