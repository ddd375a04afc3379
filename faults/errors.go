package faults

import "errors"

// ErrInvalid is returned for an unknown backend or scenario, an invalid
// option, or a request to the resource without its client, token or name.
var ErrInvalid = errors.New("faults: invalid argument")
