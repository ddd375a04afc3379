package bench_test

import (
	"context"
	"log"
	"os"
	"time"

	"github.com/padlock-go/padlock/bench"
)

// Measure padlock against the native clients on a Redis server: the
// uncontended cycle (U1) and eight waiters on one hot name (C1), in three
// interleaved rounds, then print the table and draw the charts.
func Example() {
	ctx := context.Background()
	g, err := bench.Open(ctx, "redis://127.0.0.1:6379")
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	m := bench.DefaultMatrix()
	m.C1Waiters, m.C1Holds, m.C1Thinks = []int{8}, []time.Duration{time.Millisecond}, []time.Duration{time.Millisecond}
	rep, err := bench.Run(ctx, bench.Config{
		Groups:    []*bench.Group{g},
		Workloads: []string{bench.U1, bench.C1},
		Matrix:    m,
		Duration:  3 * time.Second,
		Rounds:    3,
	})
	if err != nil {
		log.Fatal(err) // a violation of mutual exclusion is an error too
	}
	rep.WriteTable(os.Stdout)
	if _, err := rep.WriteCharts("bench-charts"); err != nil {
		log.Fatal(err)
	}
}
