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
	// R1 is P clients on one name, each acquisition a reader (RLock) with
	// probability Readers and a writer (Lock) otherwise: the read-write
	// lock against the mutex on the same name.
	R1 = "R1"
	// S1 is P clients on one name, each taking one permit of Limit
	// (WithLimit): the semaphore against the mutex on the same name.
	S1 = "S1"
	// E1 is an election: the hand-off from a leader that resigns to the
	// next candidate, the failover from a leader that stops renewing, and
	// the delay from a Proclaim to an observer.
	E1 = "E1"
)

// Workloads lists every workload in order.
var Workloads = []string{U1, U2, C1, C2, R1, S1, E1}

// recipe says whether workload measures a recipe (R1, S1, E1) rather
// than the mutex: only the implementations that offer it run it.
func recipe(workload string) bool { return workload == R1 || workload == S1 || workload == E1 }

// E1's steps.
const (
	// StepHandoff: two candidates take turns; each holds the term for
	// Hold, resigns and campaigns again at once.
	StepHandoff = "hand-off"
	// StepFailover: a leader's connections are cut (it stops renewing,
	// without resigning) while another candidate campaigns.
	StepFailover = "failover"
	// StepObserve: a leader proclaims value after value; an observer on
	// another client waits for each.
	StepObserve = "observe"
)

// ElectTTL is the lease E1's candidates campaign with (a peer's session
// TTL, ZooKeeper's session timeout): the failover is read against it.
const ElectTTL = 2 * time.Second

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
	// Readers is R1's share of acquisitions that are readers (0 to 1).
	Readers float64
	// Limit is S1's permits per name.
	Limit int
	// Step is E1's step (StepHandoff, StepFailover, StepObserve).
	Step string
}

// Contended says whether clients share names: only implementations that
// wait can run it.
func (l Load) Contended() bool { return l.Workload != U1 && l.Workload != U2 }

// String names the cell, as in tables and file names.
func (l Load) String() string {
	switch l.Workload {
	case U1:
		return "U1"
	case U2:
		return fmt.Sprintf("U2 P=%d", l.Clients)
	case C1:
		return fmt.Sprintf("C1 W=%d hold=%v think=%v", l.Clients, l.Hold, l.Think)
	case R1:
		return fmt.Sprintf("R1 P=%d readers=%.0f%% hold=%v think=%v", l.Clients, 100*l.Readers, l.Hold, l.Think)
	case S1:
		return fmt.Sprintf("S1 P=%d n=%d hold=%v think=%v", l.Clients, l.Limit, l.Hold, l.Think)
	case E1:
		if l.Step == StepHandoff {
			return fmt.Sprintf("E1 %s hold=%v", l.Step, l.Hold)
		}
		return "E1 " + l.Step
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
	// R1Clients are R1's client counts P; R1Readers its share of readers;
	// R1Hold and R1Think its hold and think.
	R1Clients       []int
	R1Readers       float64
	R1Hold, R1Think time.Duration
	// S1Clients are S1's client counts P; S1Limit its permits n; S1Hold
	// and S1Think its hold and think.
	S1Clients       []int
	S1Limit         int
	S1Hold, S1Think time.Duration
	// E1Hold is how long a leader holds its term in E1's hand-off step.
	E1Hold time.Duration
}

// DefaultMatrix is the benchmark issue's matrix.
func DefaultMatrix() Matrix {
	return Matrix{
		U2Clients: []int{1, 2, 4, 8, 16, 64},
		C1Waiters: []int{2, 4, 8, 32},
		C1Holds:   []time.Duration{0, time.Millisecond, 10 * time.Millisecond},
		C1Thinks:  []time.Duration{0, time.Millisecond},
		C2:        Load{Workload: C2, Clients: 16, Keys: 1000, Theta: 0.99, Hold: time.Millisecond, Think: time.Millisecond},
		// C1's target cell's hold and think.
		R1Clients: []int{1, 4, 16}, R1Readers: 0.9, R1Hold: time.Millisecond, R1Think: time.Millisecond,
		// C1's longer hold: permits are held most of the time, so that n
		// holders at once is reached in every run.
		S1Clients: []int{4, 16}, S1Limit: 4, S1Hold: 10 * time.Millisecond, S1Think: time.Millisecond,
		E1Hold: 10 * time.Millisecond,
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
		case R1:
			for _, p := range m.R1Clients {
				cells = append(cells, Load{Workload: R1, Clients: p, Keys: 1, Readers: m.R1Readers, Hold: m.R1Hold, Think: m.R1Think})
			}
		case S1:
			for _, p := range m.S1Clients {
				cells = append(cells, Load{Workload: S1, Clients: p, Keys: 1, Limit: m.S1Limit, Hold: m.S1Hold, Think: m.S1Think})
			}
		case E1:
			cells = append(cells, Load{Workload: E1, Clients: 2, Keys: 1, Step: StepHandoff, Hold: m.E1Hold},
				Load{Workload: E1, Clients: 2, Keys: 1, Step: StepFailover},
				Load{Workload: E1, Clients: 2, Keys: 1, Step: StepObserve})
		}
	}
	return cells
}
