package bench

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histograms record microseconds, from 1µs to 10 minutes, to three
// significant digits.
func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, 600e6, 3) }

// record adds d to h, in microseconds (a sub-microsecond time counts as
// 0; beyond the range, as the maximum).
func record(h *hdrhistogram.Histogram, d time.Duration) {
	us := d.Microseconds()
	if us > h.HighestTrackableValue() {
		us = h.HighestTrackableValue()
	}
	h.RecordValue(max(us, 0))
}

// Summary is a distribution of times, in milliseconds.
type Summary struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
}

func summarize(h *hdrhistogram.Histogram) Summary {
	if h.TotalCount() == 0 {
		return Summary{}
	}
	ms := func(us int64) float64 { return float64(us) / 1e3 }
	return Summary{
		Count: h.TotalCount(),
		Mean:  h.Mean() / 1e3,
		P50:   ms(h.ValueAtQuantile(50)),
		P90:   ms(h.ValueAtQuantile(90)),
		P99:   ms(h.ValueAtQuantile(99)),
		P999:  ms(h.ValueAtQuantile(99.9)),
		Max:   ms(h.Max()),
	}
}

// CDFPoint is one point of a latency distribution: the share of samples
// (0 to 1) at or below Ms.
type CDFPoint struct {
	Ms    float64 `json:"ms"`
	Share float64 `json:"share"`
}

// cdf samples h's distribution at fixed quantiles, for charts.
func cdf(h *hdrhistogram.Histogram) []CDFPoint {
	if h.TotalCount() == 0 {
		return nil
	}
	var pts []CDFPoint
	for _, q := range []float64{0, 1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 99.5, 99.9, 99.99, 100} {
		pts = append(pts, CDFPoint{Ms: float64(h.ValueAtQuantile(q)) / 1e3, Share: q / 100})
	}
	return pts
}

// jain is Jain's fairness index of xs: 1 when all are equal, 1/len(xs)
// when one gets everything.
func jain(xs []int64) float64 {
	var sum, sq float64
	for _, x := range xs {
		f := float64(x)
		sum += f
		sq += f * f
	}
	if sq == 0 {
		return 1
	}
	return sum * sum / (float64(len(xs)) * sq)
}
