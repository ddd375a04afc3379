package faults

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/padlock-go/padlock/bench"
)

// Report is a whole run of the suite, as results.json records it: what
// was run, where, and each cell's result. The generated sections of the
// docs are rendered from it alone (with the scenarios' descriptions).
type Report struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Host is the machine, with its load at the start and the end: other
	// work on a shared machine delays the clients, and a run's timing
	// with them.
	Host bench.Host `json:"host"`
	// Command is the command line that made the run.
	Command string `json:"command,omitempty"`
	// Faults is how many faults each run injected (at least); Duration,
	// how long each went on injecting them, if set.
	Faults   int           `json:"faults"`
	Duration time.Duration `json:"duration_ns,omitempty"`
	Backends []BackendInfo `json:"backends"`
	Results  []Result      `json:"results"`
}

// BackendInfo is a Backend as a report records it.
type BackendInfo struct {
	Name       string        `json:"name"`
	Kind       string        `json:"kind"`
	Nodes      int           `json:"nodes,omitempty"`
	Query      string        `json:"query,omitempty"`
	TTL        time.Duration `json:"ttl_ns"`
	Partitions bool          `json:"partitions,omitempty"`
}

// NewReport is the report of a run with options o, from started to now,
// on host (bench.ThisHost when the run started; its LoadEnd is set here).
func NewReport(o Options, results []Result, started time.Time, host bench.Host, command string) *Report {
	faults := o.Faults
	if faults <= 0 {
		faults = 2 // Run's default
	}
	host.LoadEnd = bench.LoadAvg()
	rep := &Report{Started: started.UTC(), Finished: time.Now().UTC(), Host: host, Command: command,
		Faults: faults, Duration: o.Duration, Results: results}
	for _, b := range o.Backends {
		rep.Backends = append(rep.Backends, BackendInfo{Name: b.Name, Kind: string(b.Kind), Nodes: b.Nodes,
			Query: b.Query, TTL: b.TTL, Partitions: b.Partitions})
	}
	return rep
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReadReport reads a report that WriteJSON wrote. Every result must name
// a scenario this build knows, since the docs describe it from the code.
func ReadReport(rd io.Reader) (*Report, error) {
	var rep Report
	dec := json.NewDecoder(rd)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		return nil, fmt.Errorf("%w: results: %v", ErrInvalid, err)
	}
	if len(rep.Results) == 0 {
		return nil, fmt.Errorf("%w: results: no results", ErrInvalid)
	}
	for _, r := range rep.Results {
		if scenarioByID(r.Scenario) == nil {
			return nil, fmt.Errorf("%w: results: scenario %d (%s) is not one of this build's", ErrInvalid, r.Scenario, r.Name)
		}
	}
	return &rep, nil
}

// scenarioByID is the scenario numbered id, or nil.
func scenarioByID(id int) *Scenario {
	for _, s := range Scenarios {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// scenarios are the scenarios of the report's results, in their order.
func (r *Report) scenarios() []*Scenario {
	var out []*Scenario
	seen := map[int]bool{}
	for _, x := range r.Results {
		if !seen[x.Scenario] {
			seen[x.Scenario] = true
			out = append(out, scenarioByID(x.Scenario))
		}
	}
	return out
}

// applied counts the results of scenarios that apply to their backend.
func (r *Report) applied() int {
	n := 0
	for _, x := range r.Results {
		if x.Expected != NA {
			n++
		}
	}
	return n
}

// failed counts the results that went against their expected outcome.
func (r *Report) failed() int {
	n := 0
	for _, x := range r.Results {
		if x.Verdict != "ok" && x.Verdict != "n/a" {
			n++
		}
	}
	return n
}
