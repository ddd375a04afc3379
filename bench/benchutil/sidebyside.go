package benchutil

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
)

// Variant is one client's version of an operation, for SideBySide.
type Variant struct {
	Name string
	Op   func() error
}

// SideBySide runs the variants' operations in turn, b.N rounds of one each
// (each round starting with the next variant), so that every variant sees
// the same machine at the same moments (these machines are shared and
// noisy: runs minutes apart are not comparable).
// It reports each variant's median as "<name>-p50-µs" and, for every
// variant after the first, the first one's speed relative to it as
// "speed-vs-<name>" (above 1: the first is faster).
func SideBySide(b *testing.B, variants ...Variant) {
	times := make([][]time.Duration, len(variants))
	for i := range times {
		times[i] = make([]time.Duration, 0, b.N)
	}
	b.ResetTimer()
	for round := range b.N {
		// Each round starts with the next variant, so that none always
		// follows the same other one.
		for j := range variants {
			i := (round + j) % len(variants)
			v := variants[i]
			start := time.Now()
			if err := v.Op(); err != nil {
				b.Fatalf("%s: %v", v.Name, err)
			}
			times[i] = append(times[i], time.Since(start))
		}
	}
	b.StopTimer()
	p50 := make([]time.Duration, len(variants))
	for i, v := range variants {
		slices.Sort(times[i])
		p50[i] = times[i][len(times[i])/2]
		b.ReportMetric(float64(p50[i].Nanoseconds())/1e3, v.Name+"-p50-µs")
	}
	for i, v := range variants[1:] {
		b.ReportMetric(float64(p50[i+1])/float64(p50[0]), "speed-vs-"+v.Name)
	}
}

// Cycle is one Lock+Unlock of name on l, as a Variant's Op.
func Cycle(ctx context.Context, l *padlock.Locker, name string) func() error {
	return func() error {
		lk, err := l.Lock(ctx, name)
		if err != nil {
			return err
		}
		return lk.Unlock(ctx)
	}
}
