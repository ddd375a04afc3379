package bench

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Charts are the files WriteCharts wrote, by title.
type Charts []Chart

// Chart is one chart, as SVG and PNG files.
type Chart struct {
	Title   string
	Backend string
	Kind    string // "throughput", "handoff", "cdf", "readers", "semaphore"
	SVG     string
	PNG     string
}

// WriteCharts draws, for each backend, throughput against clients (U2),
// hand-off latency against waiters (C1, at hold and think of 1ms, or the
// first hold and think measured), and the latency CDF of an uncontended
// cycle (U1), as SVG and PNG files in dir.
func (r *Report) WriteCharts(dir string) (Charts, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var out Charts
	err := r.eachChart(dir, func(ch Chart, p *plot.Plot) error {
		for _, f := range []string{ch.SVG, ch.PNG} {
			if err := p.Save(7*vg.Inch, 4.5*vg.Inch, f); err != nil {
				return err
			}
		}
		out = append(out, ch)
		return nil
	})
	return out, err
}

// ChartsIn lists the charts WriteCharts draws into dir, without drawing
// them.
func (r *Report) ChartsIn(dir string) (Charts, error) {
	var out Charts
	err := r.eachChart(dir, func(ch Chart, _ *plot.Plot) error {
		out = append(out, ch)
		return nil
	})
	return out, err
}

// eachChart builds each chart of the report, with its files in dir, and
// calls f with it.
func (r *Report) eachChart(dir string, f func(Chart, *plot.Plot) error) error {
	for _, b := range r.Backends {
		rs := r.of(b.Backend)
		for _, c := range []struct {
			kind string
			draw func(backend string, rs []Result) (*plot.Plot, bool, error)
		}{{"throughput", throughputChart}, {"handoff", handoffChart}, {"cdf", cdfChart}, {"readers", readersChart}, {"semaphore", semaphoreChart}} {
			p, ok, err := c.draw(b.Backend, rs)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			base := filepath.Join(dir, b.Backend+"-"+c.kind)
			if err := f(Chart{Title: p.Title.Text, Backend: b.Backend, Kind: c.kind, SVG: base + ".svg", PNG: base + ".png"}, p); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *Report) of(backend string) []Result {
	var rs []Result
	for _, x := range r.Results {
		if x.Backend == backend {
			rs = append(rs, x)
		}
	}
	return rs
}

// series groups results by implementation, in first-seen order.
func series(rs []Result, keep func(Result) bool) (names []string, by map[string][]Result) {
	by = map[string][]Result{}
	for _, x := range rs {
		if !keep(x) {
			continue
		}
		if _, ok := by[x.Impl]; !ok {
			names = append(names, x.Impl)
		}
		by[x.Impl] = append(by[x.Impl], x)
	}
	return names, by
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

// addLines adds one line with points per implementation, padlock's drawn
// thicker.
func addLines(p *plot.Plot, names []string, pts func(name string) plotter.XYs) error {
	for i, name := range names {
		xy := pts(name)
		if len(xy) == 0 {
			continue
		}
		l, s, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(0)
		s.Color = l.Color
		s.Shape = plotutil.Shape(i)
		if strings.HasPrefix(name, "padlock") {
			l.Width = vg.Points(2.5)
		}
		if name == "rtt" || strings.HasPrefix(name, "floor") {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			l.Color = color.Gray{Y: uint8(90 + 40*(i%3))}
			s.Color = l.Color
		}
		p.Add(l, s)
		p.Legend.Add(name, l, s)
	}
	return nil
}

// addByClients adds a line per implementation of y against its clients.
func addByClients(p *plot.Plot, names []string, by map[string][]Result, y func(Result) float64) error {
	return addLines(p, names, func(name string) plotter.XYs {
		var xy plotter.XYs
		for _, x := range by[name] {
			xy = append(xy, plotter.XY{X: float64(x.Clients), Y: y(x)})
		}
		return xy
	})
}

func throughputChart(backend string, rs []Result) (*plot.Plot, bool, error) {
	names, by := series(rs, func(x Result) bool { return x.Workload == U2 })
	if len(names) == 0 {
		return nil, false, nil
	}
	p := newPlot(backend+": throughput on distinct names (U2)", "clients P (log scale)", "acquisitions and releases per second")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	return p, true, addByClients(p, names, by, func(x Result) float64 { return x.PerSecond })
}

func handoffChart(backend string, rs []Result) (*plot.Plot, bool, error) {
	// The cell the targets name (hold 1ms, think 1ms), or else the
	// first hold and think measured.
	hold, think := 1.0, 1.0
	if !slices.ContainsFunc(rs, func(x Result) bool { return x.Workload == C1 && x.HoldMs == hold && x.ThinkMs == think }) {
		i := slices.IndexFunc(rs, func(x Result) bool { return x.Workload == C1 })
		if i < 0 {
			return nil, false, nil
		}
		hold, think = rs[i].HoldMs, rs[i].ThinkMs
	}
	names, by := series(rs, func(x Result) bool {
		return x.Workload == C1 && x.HoldMs == hold && x.ThinkMs == think && x.HandoffFromCall.Count > 0
	})
	if len(names) == 0 {
		return nil, false, nil
	}
	// From the release being called: from its return (the issue's
	// definition, in the tables) is 0 whenever the waiter's wake-up beats
	// the release's own answer, which push-woken locks do most of the time.
	p := newPlot(fmt.Sprintf("%s: hand-off p50, one name (C1, hold %gms, think %gms)", backend, hold, think), "waiters W (log scale)", "release called → next grant returned (ms)")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	return p, true, addByClients(p, names, by, func(x Result) float64 { return x.HandoffFromCall.P50 })
}

func cdfChart(backend string, rs []Result) (*plot.Plot, bool, error) {
	names, by := series(rs, func(x Result) bool { return x.Workload == U1 && len(x.CycleCDF) > 0 })
	if len(names) == 0 {
		return nil, false, nil
	}
	p := newPlot(backend+": latency of one acquire and release, uncontended (U1)", "cycle latency (ms, log scale)", "share of cycles at or below")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	err := addLines(p, names, func(name string) plotter.XYs {
		var xy plotter.XYs
		for _, pt := range by[name][0].CycleCDF {
			xy = append(xy, plotter.XY{X: max(pt.Ms, 0.001), Y: pt.Share})
		}
		return xy
	})
	return p, true, err
}

// readersChart is R1's throughput against clients: the read-write lock,
// the mutex on the same name, and the peers. Its title gives the run's
// share of readers.
func readersChart(backend string, rs []Result) (*plot.Plot, bool, error) {
	title := backend + ": read-heavy, one name (R1)"
	for _, x := range rs {
		if x.Workload == R1 && x.Readers > 0 {
			title = fmt.Sprintf("%s: read-heavy, one name (R1, %.0f%% readers)", backend, 100*x.Readers)
			if x.Readers == 1 {
				title = backend + ": readers only, one name (R1)"
			}
			break
		}
	}
	return recipeChart(backend, rs, R1, title)
}

// semaphoreChart is S1's throughput against clients: the semaphore and
// the mutex on the same name.
func semaphoreChart(backend string, rs []Result) (*plot.Plot, bool, error) {
	return recipeChart(backend, rs, S1, backend+": semaphore, one name (S1)")
}

func recipeChart(backend string, rs []Result, wl, title string) (*plot.Plot, bool, error) {
	names, by := series(rs, func(x Result) bool { return x.Workload == wl && x.NA == "" && x.Acquisitions > 0 })
	if len(names) == 0 {
		return nil, false, nil
	}
	p := newPlot(title, "clients P (log scale)", "acquisitions and releases per second")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	return p, true, addByClients(p, names, by, func(x Result) float64 { return x.PerSecond })
}
