//go:build !unix

package main

import (
	"context"
	"errors"
)

const (
	exitNotAcquired = 75
	exitLockLost    = 76
)

// runRun needs process groups and Unix signals.
func runRun(context.Context, []string) error {
	return errors.New("padlock run needs a Unix system (process groups and signals)")
}
