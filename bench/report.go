package bench

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is a whole run.
type Report struct {
	Started   time.Time     `json:"started"`
	Finished  time.Time     `json:"finished"`
	Duration  time.Duration `json:"turn_ns"`
	Rounds    int           `json:"rounds"`
	Workloads []string      `json:"workloads"`
	Backends  []BackendInfo `json:"backends"`
	// Host is the machine the run was made on.
	Host Host `json:"host"`
	// Command is the command line that made the run (padlock bench sets
	// it), for a reader who wants to make it again.
	Command string   `json:"command,omitempty"`
	Results []Result `json:"results"`
	Ratios  []Ratio  `json:"ratios"`
}

// BackendInfo names a group's servers.
type BackendInfo struct {
	Backend string `json:"backend"`
	URL     string `json:"url"`
}

// Result is one implementation on one cell, over every round.
type Result struct {
	Backend string `json:"backend"`
	Impl    string `json:"impl"`
	Role    Role   `json:"role"`
	// Fenced: a floor that is fenced as it is (Impl.Fenced).
	Fenced   bool    `json:"fenced,omitempty"`
	Workload string  `json:"workload"`
	Cell     string  `json:"cell"`
	Clients  int     `json:"clients"`
	Keys     int     `json:"keys"`
	HoldMs   float64 `json:"hold_ms"`
	ThinkMs  float64 `json:"think_ms"`
	Rounds   int     `json:"rounds"`

	Acquisitions int64   `json:"acquisitions"`
	WallS        float64 `json:"wall_s"`
	PerSecond    float64 `json:"per_second"`
	// GaveUp counts acquisitions the client abandoned by its own rule
	// (redsync's bounded tries).
	GaveUp int64 `json:"gave_up"`

	// Wait is from asking to holding (an uncontended acquisition's
	// latency); Release, the release call; Cycle, asking to released.
	Wait    Summary `json:"wait"`
	Release Summary `json:"release"`
	Cycle   Summary `json:"cycle"`
	// Handoff is from a release returning to a waiting client's grant
	// returning; HandoffRaced counts grants that returned first (as 0).
	Handoff      Summary `json:"handoff"`
	HandoffRaced int64   `json:"handoff_raced"`
	// HandoffFromCall is from the release being called to the grant
	// returning: the release's round trip and the wake-up.
	HandoffFromCall Summary `json:"handoff_from_call"`
	// Utilisation is the share of wall time the busiest name was held.
	Utilisation float64 `json:"utilisation"`
	// Jain is Jain's fairness index over the clients' acquisitions.
	Jain float64 `json:"jain"`
	// FIFOBoundMs is, on C1, W × (hold + hand-off p50): the longest a FIFO
	// queue makes anyone wait.
	FIFOBoundMs float64 `json:"fifo_bound_ms,omitempty"`

	// MinRT is the protocol's minimum round trips per acquisition and
	// release; RTPerAcq, those counted; WastedPerAcq, the difference.
	MinRT        int     `json:"min_rt"`
	RTPerAcq     float64 `json:"rt_per_acq"`
	WastedPerAcq float64 `json:"wasted_per_acq"`
	// CPU time per acquisition, in microseconds: this process (every
	// client, and the benchmark's own bookkeeping) and the servers (-1:
	// not on this machine).
	ClientCPUUs float64 `json:"client_cpu_us"`
	ServerCPUUs float64 `json:"server_cpu_us"`

	WaitCDF  []CDFPoint `json:"wait_cdf,omitempty"`
	CycleCDF []CDFPoint `json:"cycle_cdf,omitempty"`

	// Readers is R1's share of readers, Limit S1's permits, Step E1's
	// step. On E1's failover and observe steps, Wait is the step's time:
	// from the leader's cut to the successor's election, from a Proclaim
	// returning to an observer's receipt (HandoffRaced counts receipts
	// that came first, as 0).
	Readers float64 `json:"readers,omitempty"`
	Limit   int     `json:"limit,omitempty"`
	Step    string  `json:"step,omitempty"`
	// Most is the most holds of the name at once, as the clients saw them
	// (R1, S1).
	Most int `json:"most,omitempty"`
	// TTLMs is the lease E1's failover is read against.
	TTLMs float64 `json:"ttl_ms,omitempty"`
	// NA says why the implementation did not run the cell: its backend
	// lacks the recipe (Capabilities), or the peer has none.
	NA string `json:"na,omitempty"`
}

// ErrNotShared is a recipe that never shared its name in a run: R1's
// readers never two at once with several clients, or S1 never at its
// limit with as many clients.
var ErrNotShared = errors.New("bench: the recipe did not share")

// shared checks that a recipe shared its name as it must over a cell's
// rounds: R1's readers two at once (with P > 1), S1's n permits at once
// (with P ≥ n). The mutex baselines need not.
func (r Result) shared() error {
	switch {
	case r.NA != "" || r.Role == RoleMutex:
	case r.Workload == R1 && r.Clients > 1 && r.Most < 2:
		return fmt.Errorf("%w: %s: never two readers at once", ErrNotShared, r.Impl)
	case r.Workload == S1 && r.Clients >= r.Limit && r.Most < r.Limit:
		return fmt.Errorf("%w: %s: at most %d of %d permits held at once", ErrNotShared, r.Impl, r.Most, r.Limit)
	}
	return nil
}

// ReadJSON reads a report that WriteJSON wrote, and computes its ratios
// again (so that a report can be rendered anew by a newer padlock).
func ReadJSON(r io.Reader) (*Report, error) {
	var rep Report
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return nil, fmt.Errorf("%w: results: %v", ErrInvalid, err)
	}
	rep.Ratios = ratios(rep.Results)
	return &rep, nil
}

// WriteJSON writes the report as JSON, a result a line.
func (r *Report) WriteJSON(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	// One result a line: compact, yet a diff of two runs reads line by line.
	s := strings.ReplaceAll(string(b), `},{"backend":`, "},\n{\"backend\":")
	_, err = io.WriteString(w, s+"\n")
	return err
}

// csvHeader are the columns of WriteCSV.
var csvHeader = []string{"backend", "impl", "role", "workload", "cell", "clients", "keys", "hold_ms", "think_ms", "rounds",
	"acquisitions", "per_second", "gave_up",
	"wait_p50_ms", "wait_p90_ms", "wait_p99_ms", "wait_p999_ms", "wait_max_ms",
	"cycle_p50_ms", "cycle_p99_ms", "release_p50_ms",
	"handoff_p50_ms", "handoff_p99_ms", "handoff_max_ms", "handoffs", "handoffs_raced", "handoff_from_call_p50_ms",
	"utilisation", "jain", "fifo_bound_ms", "min_rt", "rt_per_acq", "wasted_per_acq", "client_cpu_us", "server_cpu_us",
	"readers", "limit", "step", "most", "ttl_ms", "na"}

// WriteCSV writes one row per result.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write(csvHeader)
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }
	for _, x := range r.Results {
		cw.Write([]string{x.Backend, x.Impl, string(x.Role), x.Workload, x.Cell, strconv.Itoa(x.Clients), strconv.Itoa(x.Keys), f(x.HoldMs), f(x.ThinkMs), strconv.Itoa(x.Rounds),
			strconv.FormatInt(x.Acquisitions, 10), f(x.PerSecond), strconv.FormatInt(x.GaveUp, 10),
			f(x.Wait.P50), f(x.Wait.P90), f(x.Wait.P99), f(x.Wait.P999), f(x.Wait.Max),
			f(x.Cycle.P50), f(x.Cycle.P99), f(x.Release.P50),
			f(x.Handoff.P50), f(x.Handoff.P99), f(x.Handoff.Max), strconv.FormatInt(x.Handoff.Count, 10), strconv.FormatInt(x.HandoffRaced, 10), f(x.HandoffFromCall.P50),
			f(x.Utilisation), f(x.Jain), f(x.FIFOBoundMs), strconv.Itoa(x.MinRT), f(x.RTPerAcq), f(x.WastedPerAcq), f(x.ClientCPUUs), f(x.ServerCPUUs),
			f(x.Readers), strconv.Itoa(x.Limit), x.Step, strconv.Itoa(x.Most), f(x.TTLMs), x.NA})
	}
	cw.Flush()
	return cw.Error()
}

// WriteTable prints the results as aligned text, a block per cell, and
// the ratios after them.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	cell := ""
	for _, x := range r.Results {
		if c := x.Backend + " " + x.Cell; c != cell {
			if cell != "" {
				fmt.Fprintln(tw, "\t")
			}
			cell = c
			fmt.Fprintf(tw, "%s\t\n", c)
			fmt.Fprintln(tw, "impl\tacq/s\twait p50\tp99\tmax\thand-off p50\tutil\tJain\tRT/acq\tmin RT\tgave up\tCPU µs client\tserver\t")
		}
		if x.NA != "" {
			fmt.Fprintf(tw, "%s\tn/a: %s\t\n", x.Impl, x.NA)
			continue
		}
		srv := "-"
		if x.ServerCPUUs >= 0 {
			srv = fmt.Sprintf("%.0f", x.ServerCPUUs)
		}
		hof := "-"
		if x.Handoff.Count > 0 {
			hof = fmtMs(x.Handoff.P50)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\t%s\t%.2f\t%.2f\t%.2f\t%d\t%d\t%.0f\t%s\t\n", x.Impl, x.PerSecond,
			fmtMs(x.Wait.P50), fmtMs(x.Wait.P99), fmtMs(x.Wait.Max), hof, x.Utilisation, x.Jain, x.RTPerAcq, x.MinRT, x.GaveUp, x.ClientCPUUs, srv)
	}
	if len(r.Ratios) > 0 {
		fmt.Fprintln(tw, "\t")
		fmt.Fprintln(tw, "ratio\tbackend\tcell\tpadlock\tvalue\tversus\t")
		for _, q := range r.Ratios {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2f\t%s\t\n", q.What, q.Backend, q.Cell, q.Impl, q.Value, q.Versus)
		}
	}
	return tw.Flush()
}

// fmtMs prints milliseconds with sensible precision.
func fmtMs(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0fms", v)
	case v >= 1:
		return fmt.Sprintf("%.1fms", v)
	default:
		return fmt.Sprintf("%.0fµs", v*1000)
	}
}
