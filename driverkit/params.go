package driverkit

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/padlock-go/padlock/backends"
)

// BoolParam returns the boolean in u's query parameter key, or def.
func BoolParam(u *url.URL, key string, def bool) (bool, error) {
	v, ok := u.Query()[key]
	if !ok {
		return def, nil
	}
	b, err := strconv.ParseBool(v[0])
	if err != nil {
		return false, fmt.Errorf("%w: url parameter %s=%q is not a boolean", backends.ErrInvalidOption, key, v[0])
	}
	return b, nil
}

// IntParam returns the integer in u's query parameter key, at least min,
// or def when it is absent.
func IntParam(u *url.URL, key string, min, def int) (int, error) {
	v, ok := u.Query()[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v[0])
	if err != nil || n < min {
		return 0, fmt.Errorf("%w: url parameter %s=%q is not a whole number of at least %d", backends.ErrInvalidOption, key, v[0], min)
	}
	return n, nil
}

// DurationParam returns the positive duration in u's query parameter key,
// or def when it is absent.
func DurationParam(u *url.URL, key string, def time.Duration) (time.Duration, error) {
	v, ok := u.Query()[key]
	if !ok {
		return def, nil
	}
	d, err := time.ParseDuration(v[0])
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%w: url parameter %s=%q is not a positive duration", backends.ErrInvalidOption, key, v[0])
	}
	return d, nil
}

// Timeouts returns the dial_timeout and request_timeout parameters of u:
// how long Open waits for the server (dial, default def), and the bound on
// each request (default DefaultRequestTimeout).
func Timeouts(u *url.URL, def time.Duration) (dial, request time.Duration, err error) {
	if dial, err = DurationParam(u, "dial_timeout", def); err != nil {
		return 0, 0, err
	}
	if request, err = DurationParam(u, "request_timeout", DefaultRequestTimeout); err != nil {
		return 0, 0, err
	}
	return dial, request, nil
}
