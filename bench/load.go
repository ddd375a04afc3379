package bench

import (
	"fmt"
	"time"
)

// The workloads.
const (
	// U1 is one client on one name, in a closed loop: the cost of an
	// uncontended acquisition and release, and its round trips.
	U1 = "U1"
	// U2 is P clients, each on a name of its own: throughput as clients
	// grow, without contention.
	U2 = "U2"
	// C1 is W waiters on one hot name, each holding it for a while and
	// thinking between attempts: waits, hand-offs, fairness.
	C1 = "C1"
	// C2 is clients over a Zipfian key space: mixed contention.
	C2 = "C2"
)

// Workloads lists every workload in order.
var Workloads = []string{U1, U2, C1, C2}

// Load is one cell of a workload: how many clients, over how many names,
// holding and thinking how long.
type Load struct {
	Workload string
	Clients  int
	// Keys is the number of names: 1 on a hot name, Clients for distinct
	// names, or the size of a Zipfian key space.
	Keys int
	// Theta is the Zipfian skew of the key choice (0: uniform; distinct
	// keys when Keys == Clients and Theta is 0 give each client its own).
	Theta float64
	// Hold is how long each acquisition is held; Think, how long a client
	// waits off the lock before asking again.
	Hold, Think time.Duration
}

// Contended says whether clients share names: only implementations that
// wait can run it.
func (l Load) Contended() bool { return l.Workload == C1 || l.Workload == C2 }

// String names the cell, as in tables and file names.
func (l Load) String() string {
	switch l.Workload {
	case U1:
		return "U1"
	case U2:
		return fmt.Sprintf("U2 P=%d", l.Clients)
	case C1:
		return fmt.Sprintf("C1 W=%d hold=%v think=%v", l.Clients, l.Hold, l.Think)
	default:
		return fmt.Sprintf("C2 N=%d keys=%d θ=%.2f hold=%v think=%v", l.Clients, l.Keys, l.Theta, l.Hold, l.Think)
	}
}

// Matrix is the set of cells a run covers.
type Matrix struct {
	// U2Clients are U2's client counts P.
	U2Clients []int
	// C1Waiters, C1Holds and C1Thinks span C1's cells.
	C1Waiters         []int
	C1Holds, C1Thinks []time.Duration
	// C2 is C2's one cell.
	C2 Load
}

// DefaultMatrix is the benchmark issue's matrix.
func DefaultMatrix() Matrix {
	return Matrix{
		U2Clients: []int{1, 2, 4, 8, 16, 64},
		C1Waiters: []int{2, 4, 8, 32},
		C1Holds:   []time.Duration{0, time.Millisecond, 10 * time.Millisecond},
		C1Thinks:  []time.Duration{0, time.Millisecond},
		C2:        Load{Workload: C2, Clients: 16, Keys: 1000, Theta: 0.99, Hold: time.Millisecond, Think: time.Millisecond},
	}
}

// Cells lists the cells of workloads, in order.
func (m Matrix) Cells(workloads []string) []Load {
	var cells []Load
	for _, w := range workloads {
		switch w {
		case U1:
			cells = append(cells, Load{Workload: U1, Clients: 1, Keys: 1})
		case U2:
			for _, p := range m.U2Clients {
				cells = append(cells, Load{Workload: U2, Clients: p, Keys: p})
			}
		case C1:
			for _, w := range m.C1Waiters {
				for _, h := range m.C1Holds {
					for _, t := range m.C1Thinks {
						cells = append(cells, Load{Workload: C1, Clients: w, Keys: 1, Hold: h, Think: t})
					}
				}
			}
		case C2:
			cells = append(cells, m.C2)
		}
	}
	return cells
}
