package faults

import "errors"

// ErrInvalid is returned for an unknown backend or scenario, or an invalid
// option.
var ErrInvalid = errors.New("faults: invalid argument")
