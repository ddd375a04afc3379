package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The console's charts of the applications' own measurements: what only
// the Lockers that acquire can know (how long each waited), read from
// their metrics (docs/operations.md), which applications serve to
// Prometheus. Lock names are never metric attributes, so these charts
// are per backend, not per name or prefix.

// Padlock's metrics as the OpenTelemetry Prometheus exporter names them.
const (
	promAcquire = "padlock_acquire_duration_seconds" // a histogram: its count by outcome
	promWait    = "padlock_wait_duration_seconds"
	promHandoff = "padlock_handoff_duration_seconds"
	promLost    = "padlock_locks_lost_total"
	promBackend = "padlock_backend"
	promOutcome = "padlock_outcome"
)

// errScrape is the error of an endpoint that did not serve metrics.
var errScrape = errors.New("metrics endpoint")

// appMetrics reads applications' Prometheus endpoints (serve --metrics)
// every `every`, and keeps how much each backend's counters rose between
// rounds, summed over the endpoints, for spanWindow.
type appMetrics struct {
	sources []*appSource
	every   time.Duration
	client  *http.Client

	mu     sync.Mutex
	rounds []appRound // oldest first
	last   time.Time  // the last round's time
	view   *appView   // computed after each round
}

// appSource is one endpoint and what its last read found.
type appSource struct {
	url, label string
	totals     map[string]*appTotals // per backend, at the last read; nil before one succeeded
	at         time.Time             // the last read that succeeded
	err        string                // the last read's error, "" if it succeeded
}

// appTotals are a backend's counters at one read, or their rise between
// two: acquisitions, holds lost, and the cumulative bucket counts by upper
// bound (+Inf included) of the waits and of the timed hand-offs.
type appTotals struct {
	acquired, lost float64
	wait, handoff  map[float64]float64
}

func newAppTotals() *appTotals {
	return &appTotals{wait: map[float64]float64{}, handoff: map[float64]float64{}}
}

// appRound is one round of reads: each backend's rise since the round
// before (dt earlier), over every endpoint.
type appRound struct {
	at time.Time
	dt time.Duration
	by map[string]*appTotals
}

// appView is what the page draws: each endpoint's state, and for each of
// the page's windows (by its length in ms) and each backend, the window
// in steps of a thirtieth.
type appView struct {
	Sources  []appSourceView                 `json:"sources"`
	Backends []string                        `json:"backends"`
	Windows  map[string]map[string][]appStep `json:"windows"`
}

type appSourceView struct {
	Label string     `json:"label"`
	At    *time.Time `json:"at,omitempty"`
	Error string     `json:"error,omitempty"`
}

// appStep is one step of a window: acquisitions a second, holds lost,
// the median and 99th percentile wait (seconds) of the Lock calls that
// acquired in it, and of the hand-offs timed in it (from a release to
// the next holder's grant, between holds of one application's Locker),
// where there were any.
type appStep struct {
	At       time.Time `json:"at"` // the step's end
	Rate     float64   `json:"rate"`
	Lost     float64   `json:"lost"`
	P50      *float64  `json:"p50,omitempty"`
	P99      *float64  `json:"p99,omitempty"`
	Handoffs float64   `json:"handoffs"`
	HP50     *float64  `json:"hp50,omitempty"`
	HP99     *float64  `json:"hp99,omitempty"`
}

// appWindows are the page's windows (its select), in milliseconds.
var appWindows = []time.Duration{30 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute}

// appSteps is how many steps a window has, as the contention chart.
const appSteps = 30

// newAppMetrics checks the endpoints' URLs: http or https, with a host.
func newAppMetrics(urls []string, every time.Duration) (*appMetrics, error) {
	m := &appMetrics{every: every,
		client: &http.Client{Timeout: every, Transport: http.DefaultTransport.(*http.Transport).Clone()}}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usageError{fmt.Errorf("--metrics %q: want an http or https URL of a Prometheus endpoint", raw)}
		}
		u.User = nil
		m.sources = append(m.sources, &appSource{url: raw, label: u.String()})
	}
	return m, nil
}

// run reads every endpoint every m.every until ctx ends.
func (m *appMetrics) run(ctx context.Context) {
	t := time.NewTicker(m.every)
	defer t.Stop()
	defer m.client.CloseIdleConnections()
	for {
		m.round(ctx, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// round reads each endpoint once and records the rise of its counters
// since its last read. An endpoint whose counters fell restarted: its
// counts since the restart are the rise.
func (m *appMetrics) round(ctx context.Context, now time.Time) {
	type read struct {
		totals map[string]*appTotals
		err    error
	}
	reads := make([]read, len(m.sources))
	var wg sync.WaitGroup
	for i, s := range m.sources {
		wg.Go(func() {
			reads[i].totals, reads[i].err = m.scrape(ctx, s.url)
		})
	}
	wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	rise := map[string]*appTotals{}
	for i, s := range m.sources {
		r := reads[i]
		if r.err != nil {
			s.err = r.err.Error()
			continue
		}
		if s.totals != nil {
			for b, now := range r.totals {
				add(rise, b, now.since(s.totals[b]))
			}
		}
		s.totals, s.at, s.err = r.totals, now, ""
	}
	if !m.last.IsZero() {
		m.rounds = append(m.rounds, appRound{at: now, dt: now.Sub(m.last), by: rise})
	}
	m.last = now
	cut := 0
	for cut < len(m.rounds) && now.Sub(m.rounds[cut].at) > spanWindow {
		cut++
	}
	m.rounds = m.rounds[cut:]
	m.view = m.render(now)
}

// since is t's rise from before, the same endpoint's last read. All of t
// rose since then where before is nil (the backend's series appeared
// after that read: they start at zero) or a counter fell (the endpoint
// restarted, and t counts from the restart).
func (t *appTotals) since(before *appTotals) *appTotals {
	if before == nil || t.acquired < before.acquired || t.lost < before.lost {
		return t
	}
	out := newAppTotals()
	out.acquired, out.lost = t.acquired-before.acquired, t.lost-before.lost
	for le, n := range t.wait {
		out.wait[le] = max(n-before.wait[le], 0)
	}
	for le, n := range t.handoff {
		out.handoff[le] = max(n-before.handoff[le], 0)
	}
	return out
}

// add adds t (if any) to backend b's totals in into.
func add(into map[string]*appTotals, b string, t *appTotals) {
	if t == nil {
		return
	}
	if into[b] == nil {
		into[b] = newAppTotals()
	}
	into[b].plus(t)
}

// plus adds t's counts to s's.
func (s *appTotals) plus(t *appTotals) {
	s.acquired += t.acquired
	s.lost += t.lost
	for le, n := range t.wait {
		s.wait[le] += n
	}
	for le, n := range t.handoff {
		s.handoff[le] += n
	}
}

// scrape reads one endpoint: padlock's counters per backend.
func (m *appMetrics) scrape(ctx context.Context, url string) (map[string]*appTotals, error) {
	ctx, cancel := context.WithTimeout(ctx, m.every)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errScrape, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %s", errScrape, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errScrape, err)
	}
	return totalsOf(fams), nil
}

// totalsOf sums padlock's counters in fams per backend: acquisitions
// that acquired (every operation), holds lost, and the buckets of the
// waits and of the timed hand-offs.
func totalsOf(fams map[string]*dto.MetricFamily) map[string]*appTotals {
	out := map[string]*appTotals{}
	of := func(m *dto.Metric) *appTotals {
		b := label(m, promBackend)
		t := out[b]
		if t == nil {
			t = newAppTotals()
			out[b] = t
		}
		return t
	}
	if f := fams[promAcquire]; f != nil {
		for _, m := range f.GetMetric() {
			if label(m, promOutcome) == "acquired" && m.GetHistogram() != nil {
				of(m).acquired += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	if f := fams[promLost]; f != nil {
		for _, m := range f.GetMetric() {
			of(m).lost += m.GetCounter().GetValue()
		}
	}
	for name, into := range map[string]func(*appTotals) map[float64]float64{
		promWait:    func(t *appTotals) map[float64]float64 { return t.wait },
		promHandoff: func(t *appTotals) map[float64]float64 { return t.handoff },
	} {
		f := fams[name]
		if f == nil {
			continue
		}
		for _, m := range f.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				addBuckets(into(of(m)), h)
			}
		}
	}
	return out
}

// addBuckets adds h's cumulative bucket counts to buckets, by upper bound.
func addBuckets(buckets map[float64]float64, h *dto.Histogram) {
	inf := false // the text format lists le="+Inf"; other sources may not
	for _, b := range h.GetBucket() {
		buckets[b.GetUpperBound()] += float64(b.GetCumulativeCount())
		inf = inf || math.IsInf(b.GetUpperBound(), 1)
	}
	if !inf {
		buckets[math.Inf(1)] += float64(h.GetSampleCount())
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// render computes the view at now from the rounds. m.mu is held.
func (m *appMetrics) render(now time.Time) *appView {
	v := &appView{Windows: map[string]map[string][]appStep{}}
	for _, s := range m.sources {
		sv := appSourceView{Label: s.label, Error: s.err}
		if !s.at.IsZero() {
			at := s.at
			sv.At = &at
		}
		v.Sources = append(v.Sources, sv)
	}
	backends := map[string]bool{}
	for _, r := range m.rounds {
		for b := range r.by {
			backends[b] = true
		}
	}
	for b := range backends {
		v.Backends = append(v.Backends, b)
	}
	slices.Sort(v.Backends)
	for _, w := range appWindows {
		step := w / appSteps
		from := now.Add(-w)
		per := map[string][]appStep{}
		for _, b := range v.Backends {
			// Each step sums the rounds that ended in it, and its rate is
			// over the time those rounds cover.
			sums := make([]*appTotals, appSteps)
			spans := make([]time.Duration, appSteps)
			for _, r := range m.rounds {
				if !r.at.After(from) {
					continue
				}
				i := min(int(r.at.Sub(from)/step), appSteps-1)
				if sums[i] == nil {
					sums[i] = newAppTotals()
				}
				spans[i] += r.dt
				if t := r.by[b]; t != nil {
					sums[i].plus(t)
				}
			}
			var steps []appStep
			for i, t := range sums {
				if t == nil {
					continue // no round in it: nothing known
				}
				st := appStep{At: from.Add(time.Duration(i+1) * step), Rate: t.acquired / spans[i].Seconds(), Lost: t.lost}
				st.P50, st.P99 = quantile(0.5, t.wait), quantile(0.99, t.wait)
				st.Handoffs = t.handoff[math.Inf(1)]
				st.HP50, st.HP99 = quantile(0.5, t.handoff), quantile(0.99, t.handoff)
				steps = append(steps, st)
			}
			per[b] = steps
		}
		v.Windows[strconv.FormatInt(w.Milliseconds(), 10)] = per
	}
	return v
}

// quantile is Prometheus's histogram_quantile over cumulative bucket
// counts by upper bound: linear within the bucket the rank falls in (from
// 0 for the first), the highest finite bound if it falls in +Inf; nil
// when there is nothing counted.
func quantile(q float64, buckets map[float64]float64) *float64 {
	bounds := make([]float64, 0, len(buckets))
	for le := range buckets {
		bounds = append(bounds, le)
	}
	slices.Sort(bounds)
	if len(bounds) == 0 || buckets[bounds[len(bounds)-1]] <= 0 {
		return nil
	}
	total := buckets[bounds[len(bounds)-1]]
	rank := q * total
	lower, below := 0.0, 0.0
	for _, le := range bounds {
		n := buckets[le]
		if n >= rank {
			if math.IsInf(le, 1) {
				return &lower
			}
			v := lower
			if n > below {
				v += (le - lower) * (rank - below) / (n - below)
			}
			return &v
		}
		lower, below = le, n
	}
	return &lower
}

// current is the latest view, or nil without --metrics.
func (m *appMetrics) current() *appView {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.view
}
