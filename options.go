package padlock

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

const (
	// DefaultTTL is the lease a hold gets unless WithTTL or ?ttl= says
	// otherwise. Ten seconds lets a crashed client's locks free up quickly
	// while leaving the renewal loop, which renews at TTL/3, two more tries
	// after a missed renewal before the hold is given up.
	DefaultTTL = 10 * time.Second

	// DefaultWait is the wait bound of Lock: zero, which means Lock waits
	// until it holds the lock or its context is done.
	DefaultWait time.Duration = 0

	// MinTTL is the shortest TTL accepted. Below it the safety margin and
	// the renewal period leave too little time for a round trip.
	// Capabilities().MinTTL, the shortest lease a hold really gets on a
	// backend, is never below it. It is backends.MinTTL, the policy the
	// drivers follow too.
	MinTTL = backends.MinTTL

	// DefaultRequestTimeout bounds every single request padlock makes to a
	// server, whatever the caller's context says: TryLock, Unlock and each
	// request of a waiting Lock give up after it with ErrUnavailable.
	DefaultRequestTimeout = driverkit.DefaultRequestTimeout
)

// DefaultRetry is the polling schedule of backends that cannot be woken by
// their server: exponential from 10ms to 500ms with jitter.
var DefaultRetry = ExponentialBackoff(10*time.Millisecond, 500*time.Millisecond)

// Option changes one setting of an acquisition when passed to Lock or
// TryLock, or the default of every acquisition when passed to Open.
type Option interface {
	OpenOption
	applyLock(*settings) error
}

// OpenOption configures a Locker when passed to Open or NewLocker. Every
// Option is an OpenOption too, which sets the Locker's default.
type OpenOption interface {
	applyOpen(*openSettings) error
}

// settings of one acquisition.
type settings struct {
	ttl   time.Duration
	wait  time.Duration
	retry Retry
	limit int
	elect bool   // a candidacy (Election.Campaign), never a user's option
	value string // the candidacy's value
}

// openSettings of one Locker.
type openSettings struct {
	defaults settings
	logger   *slog.Logger
	meters   metric.MeterProvider // nil: the global one
	tracers  trace.TracerProvider // nil: the global one
	backend  string               // the padlock.backend attribute; Open sets the scheme
	tls      *tls.Config          // WithTLSConfig
	dial     backends.DialFunc    // WithDialer
}

type lockOption func(*settings) error

func (o lockOption) applyLock(s *settings) error     { return o(s) }
func (o lockOption) applyOpen(s *openSettings) error { return o(&s.defaults) }

type openOption func(*openSettings) error

func (o openOption) applyOpen(s *openSettings) error { return o(s) }

func defaultSettings() settings {
	return settings{ttl: DefaultTTL, wait: DefaultWait, retry: DefaultRetry, limit: 1}
}

func defaultOpenSettings() openSettings {
	return openSettings{defaults: defaultSettings(), logger: slog.New(slog.DiscardHandler)}
}

// apply returns a copy of s with opts applied; s is never changed.
func (s settings) apply(opts []Option) (settings, error) {
	for _, o := range opts {
		if o == nil {
			return s, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		if err := o.applyLock(&s); err != nil {
			return s, err
		}
	}
	return s, nil
}

// apply returns a copy of s with opts applied; s is never changed.
func (s openSettings) apply(opts []OpenOption) (openSettings, error) {
	for _, o := range opts {
		if o == nil {
			return s, fmt.Errorf("%w: nil Option", ErrInvalidOption)
		}
		if err := o.applyOpen(&s); err != nil {
			return s, err
		}
	}
	return s, nil
}

// WithTTL sets the lease of a hold. The renewal loop renews it at TTL/3 for
// as long as the lock is held; TTL only bounds how long a crashed holder
// blocks others. It must be at least MinTTL. A backend may raise it to its
// own minimum (etcd grants whole seconds of at least its minimum lease),
// which Capabilities().MinTTL reports.
func WithTTL(ttl time.Duration) Option {
	return lockOption(func(s *settings) error {
		if ttl < MinTTL {
			return fmt.Errorf("%w: ttl %v is shorter than the minimum %v", ErrInvalidOption, ttl, MinTTL)
		}
		s.ttl = ttl
		return nil
	})
}

// WithWait bounds how long Lock waits for the lock; it then fails with an
// error matching both ErrTimeout and context.DeadlineExceeded. Zero means no
// bound beyond the context. TryLock never waits, whatever this says.
func WithWait(wait time.Duration) Option {
	return lockOption(func(s *settings) error {
		if wait < 0 {
			return fmt.Errorf("%w: wait %v is negative", ErrInvalidOption, wait)
		}
		s.wait = wait
		return nil
	})
}

// WithLimit makes Lock and TryLock take one permit of a semaphore of n:
// up to n holds of the name at once, each with its own lease, renewal,
// Done and token. The default, 1, is the mutex. Every holder and waiter of
// a name must ask the same n: a different one (a plain Lock counts as 1)
// fails with an error matching ErrInvalidOption that names both. RLock
// takes no limit above 1. n below 1 is ErrInvalidOption. See
// docs/semaphore.md.
func WithLimit(n int) Option {
	return lockOption(func(s *settings) error {
		if n < 1 {
			return fmt.Errorf("%w: limit %d is below 1", ErrInvalidOption, n)
		}
		s.limit = n
		return nil
	})
}

// WithRetry sets the polling schedule for backends that must poll. Backends
// with push wake-ups (etcd watches, Redis pub/sub) ignore it.
func WithRetry(r Retry) Option {
	return lockOption(func(s *settings) error {
		if r == nil {
			return fmt.Errorf("%w: nil Retry", ErrInvalidOption)
		}
		s.retry = r
		return nil
	})
}

// WithLogger routes what the backend and its client library have to say
// (reconnects, dropped connections, cleanup that keeps failing) to logger.
// Without it padlock logs nothing: a library must not write to its user's
// stderr.
func WithLogger(logger *slog.Logger) OpenOption {
	return openOption(func(s *openSettings) error {
		if logger == nil {
			return fmt.Errorf("%w: nil Logger", ErrInvalidOption)
		}
		s.logger = logger
		return nil
	})
}

// WithMeterProvider sends padlock's metrics to mp instead of the global
// MeterProvider (otel.GetMeterProvider). See docs/operations.md for the
// instruments.
func WithMeterProvider(mp metric.MeterProvider) OpenOption {
	return openOption(func(s *openSettings) error {
		if mp == nil {
			return fmt.Errorf("%w: nil MeterProvider", ErrInvalidOption)
		}
		s.meters = mp
		return nil
	})
}

// WithTracerProvider sends padlock's spans (one per Lock, TryLock and
// Unlock, and one when a hold is lost) to tp instead of the global
// TracerProvider (otel.GetTracerProvider).
func WithTracerProvider(tp trace.TracerProvider) OpenOption {
	return openOption(func(s *openSettings) error {
		if tp == nil {
			return fmt.Errorf("%w: nil TracerProvider", ErrInvalidOption)
		}
		s.tracers = tp
		return nil
	})
}

// WithTLSConfig makes Open connect over TLS with cfg, for applications
// that build their own (from a secrets manager, with custom verification).
// URL parameters (ca=, cert=, key=, server_name=) add to a clone of it.
// See docs/security.md.
func WithTLSConfig(cfg *tls.Config) OpenOption {
	return openOption(func(s *openSettings) error {
		if cfg == nil {
			return fmt.Errorf("%w: nil tls.Config", ErrInvalidOption)
		}
		s.tls = cfg
		return nil
	})
}

// WithDialer makes Open's backend open every connection to its servers
// with dial instead of a net.Dialer: through a proxy or a tunnel, on a
// custom network, or wrapped to count what goes over it (padlock bench
// counts round trips this way). TLS, when configured, runs over the
// connection dial returns. Lockers built with a backend's New use the
// client the application gave them, and ignore it.
func WithDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) OpenOption {
	return openOption(func(s *openSettings) error {
		if dial == nil {
			return fmt.Errorf("%w: nil dial function", ErrInvalidOption)
		}
		s.dial = dial
		return nil
	})
}

// Retry paces the attempts of a backend that has to poll; see
// backends.Retry for the contract.
type Retry = backends.Retry

// NoRetry never retries: a polling backend gives up after one attempt.
func NoRetry() Retry { return backends.NoRetry() }

// LinearBackoff polls at a fixed interval.
func LinearBackoff(every time.Duration) Retry { return backends.LinearBackoff(every) }

// ExponentialBackoff polls with a doubling interval from min to max, each
// wait drawn from its upper half (equal jitter).
func ExponentialBackoff(min, max time.Duration) Retry { return backends.ExponentialBackoff(min, max) }

// LimitRetry stops r after max attempts.
func LimitRetry(r Retry, max int) Retry { return backends.LimitRetry(r, max) }
