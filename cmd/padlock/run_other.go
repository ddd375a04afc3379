//go:build !unix

package main

import (
	"context"
	"errors"
	"io"
)

const (
	exitNotAcquired = 75
	exitLockLost    = 76
)

// runRun needs process groups and Unix signals.
func runRun(context.Context, []string) error {
	return errors.New("padlock run needs a Unix system (process groups and signals)")
}

// runElect needs process groups and Unix signals.
func runElect(context.Context, []string, io.Writer) error {
	return errors.New("padlock elect needs a Unix system (process groups and signals)")
}
