package bench

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/padlock-go/padlock/padlocktest"
)

// targetRounds is BenchmarkTargets' rounds: a flag, not b.N, since the
// testing package runs a benchmark once with b.N = 1 before any larger
// b.N, and a run of one round would decide alone.
var targetRounds = flag.Int("targets.rounds", 6, "BenchmarkTargets: rounds of 1s turns per cell and implementation")

// BenchmarkTargets holds padlock to the benchmark's targets (targets.go:
// the uncontended cycle against the floor and the fenced floor, its round
// trips, etcd's and fair Redis's contended cell against the peers, the
// longest wait against the FIFO bound, U2 against the best peer), one
// backend at a time: it runs the cells the targets are set on (U1; U2 at
// 4 and 16 clients; C1 at 8 waiters, hold 1ms, think 1ms) for every
// implementation of the backend, -targets.rounds rounds (6, as the
// focused run) of 1s turns interleaved as padlock bench does, and fails
// each target the run does not meet, with what it measured. The verdicts
// are those of docs/benchmarks.md's "Against the targets", computed by
// the same code. Each b.N runs it again; the default -benchtime runs it
// once:
//
//	go test ./bench -run '^$' -bench Targets -timeout 4h
//	go test ./bench -run '^$' -bench 'Targets/redis$' -targets.rounds 8
//
// With -short (scripts/test runs every benchmark once that way) it runs
// on Redis alone, whose targets are the most (the fair mode's among
// them), one round of 200ms turns with U2 at 4 clients: only to prove it
// runs. Ratios of so short a run on a loaded machine are noise, so it
// holds nothing to the targets; Run's own checks (mutual exclusion, token
// order, no key left behind) still fail it. Every backend's
// implementations run at that size in BenchmarkU1, BenchmarkU2 and
// BenchmarkC1.
func BenchmarkTargets(b *testing.B) {
	m := DefaultMatrix()
	m.U2Clients = []int{4, 16}
	m.C1Waiters, m.C1Holds, m.C1Thinks = []int{8}, []time.Duration{time.Millisecond}, []time.Duration{time.Millisecond}
	d, rounds, kinds := time.Second, *targetRounds, LocalKinds
	if testing.Short() {
		m.U2Clients, d, rounds, kinds = []int{4}, 200*time.Millisecond, 1, []padlocktest.Kind{padlocktest.Redis}
	}
	for _, kind := range kinds {
		b.Run(string(kind), func(b *testing.B) {
			g := benchGroup(b, kind)
			for range b.N {
				targetsOnce(b, g, m, d, rounds)
			}
		})
	}
}

// targetsOnce is one run of BenchmarkTargets on g's backend.
func targetsOnce(b *testing.B, g *Group, m Matrix, d time.Duration, rounds int) {
	rep, err := Run(context.Background(), Config{Groups: []*Group{g}, Workloads: []string{U1, U2, C1},
		Matrix: m, Duration: d, Rounds: rounds})
	if err != nil {
		b.Fatal(err)
	}
	measured := 0
	for _, t := range rep.Targets() {
		if t.Measured == "" {
			continue // not a target of this backend
		}
		measured++
		if !testing.Short() && t.Met != "yes" {
			b.Errorf("target not met: %s: %s (met: %s)", t.Target, t.Measured, t.Met)
		} else {
			b.Logf("%s: %s (met: %s)", t.Target, t.Measured, t.Met)
		}
	}
	if measured == 0 {
		b.Errorf("no target measured on %s", g.Backend)
	}
}
