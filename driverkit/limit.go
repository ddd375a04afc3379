package driverkit

import (
	"fmt"

	"github.com/padlock-go/padlock/backends"
)

// LimitMismatch is the error a driver returns for a request whose limit
// (backends.Request.Limit) differs from that of a live hold or waiter on
// the name: it matches backends.ErrInvalidOption and names both limits.
func LimitMismatch(name string, held, asked int) error {
	return fmt.Errorf("%w: lock %q is held or awaited with limit %d; asked with limit %d (every holder of a name must ask the same limit; a plain Lock or RLock counts as 1)",
		backends.ErrInvalidOption, name, held, asked)
}
