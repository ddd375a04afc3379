package driverkit

import (
	"errors"
	"fmt"

	"github.com/padlock-go/padlock/backends"
)

// unavailableError matches backends.ErrUnavailable and keeps its cause reachable
// with errors.Is and errors.As.
type unavailableError struct {
	what  string
	cause error
}

func (e *unavailableError) Error() string {
	return backends.ErrUnavailable.Error() + ": " + e.what + ": " + e.cause.Error()
}

func (e *unavailableError) Unwrap() []error { return []error{backends.ErrUnavailable, e.cause} }

// Unavailable classifies cause, the failure of what (for example
// "etcd acquire"), as backends.ErrUnavailable. The cause stays reachable: a dial
// error still matches with errors.As, a deadline with errors.Is.
func Unavailable(what string, cause error) error {
	if cause == nil {
		return nil
	}
	if errors.Is(cause, backends.ErrUnavailable) {
		return fmt.Errorf("%s: %w", what, cause)
	}
	return &unavailableError{what: what, cause: cause}
}
