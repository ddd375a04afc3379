package faults

import (
	"time"

	"golang.org/x/sys/unix"
)

// now is the machine's monotonic clock (CLOCK_MONOTONIC) in nanoseconds:
// one clock for every process of a run, unlike Go's monotonic readings,
// which only compare within a process.
func now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("faults: CLOCK_MONOTONIC: " + err.Error())
	}
	return ts.Nano()
}

// since is the time from t (a now reading) to now.
func since(t int64) time.Duration { return time.Duration(now() - t) }
