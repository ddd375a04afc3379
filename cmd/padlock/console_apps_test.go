package main

import (
	"context"
	"errors"
	"math"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/padlocktest"
)

// quantile reads cumulative buckets as Prometheus's histogram_quantile
// does: linear within a bucket, the highest finite bound past it.
func TestQuantile(t *testing.T) {
	b := map[float64]float64{0.001: 50, 0.01: 90, 0.1: 99, math.Inf(1): 100}
	for _, c := range []struct{ q, want float64 }{
		{0.5, 0.001}, {0.75, 0.001 + 0.009*25/40}, {0.9, 0.01}, {0.99, 0.1}, {0.995, 0.1},
	} {
		got := quantile(c.q, b)
		if got == nil || math.Abs(*got-c.want) > 1e-12 {
			t.Errorf("q%v = %v, want %v", c.q, got, c.want)
		}
	}
	if got := quantile(0.5, map[float64]float64{0.001: 0, math.Inf(1): 0}); got != nil {
		t.Errorf("q0.5 of nothing = %v, want none", *got)
	}
}

// app is an application's padlock metrics on a Prometheus endpoint, as
// the OpenTelemetry exporter serves them.
func app(t *testing.T) (*sdkmetric.MeterProvider, *httptest.Server) {
	t.Helper()
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(func() { srv.Close(); mp.Shutdown(context.Background()) })
	return mp, srv
}

// The console reads an application's endpoint and counts exactly what its
// Lockers did between two reads: acquisitions (uncontended, waiters', and
// a hold then lost to a force release), the loss, a wait per acquiring
// Lock, and the one hand-off that one Locker timed (its own hold to its
// own waiter; the other, between two Lockers, is not); the view has the
// step, with its rate and quantiles. An
// endpoint that does not answer is named with its error, and the others
// still count. A URL that is not http(s) is a usage error.
func TestAppMetricsCount(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mp, srv := app(t)
	dead := httptest.NewServer(nil)
	dead.Close()
	m, err := newAppMetrics([]string{srv.URL, dead.URL}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const url = "mem://apps-count"
	a, err := padlock.Open(ctx, url, padlock.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := padlock.Open(ctx, url, padlock.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	t0 := time.Now()
	m.round(ctx, t0) // the baseline: nothing counted yet
	for range 5 {
		lk, err := a.Lock(ctx, "solo")
		if err != nil {
			t.Fatal(err)
		}
		lk.Unlock(ctx)
	}
	handOff(t, ctx, a, b, "hot") // between two Lockers: not timed
	handOff(t, ctx, a, a, "hot") // within one: timed
	lost, err := a.Lock(ctx, "lost")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.ForceUnlock(ctx, "lost"); err != nil {
		t.Fatal(err)
	}
	<-lost.Done()
	if !errors.Is(lost.Err(), padlock.ErrLost) {
		t.Fatalf("a force-released hold ended with %v, want ErrLost", lost.Err())
	}
	// Done closes before the loss is recorded (no provider's code may
	// delay Done): wait for the record, a condition, polled.
	padlocktest.WaitFor(t, "the loss recorded", 30*time.Second, func() bool {
		totals, err := m.scrape(ctx, srv.URL)
		return err == nil && totals["mem"] != nil && totals["mem"].lost >= 1
	})

	m.round(ctx, t0.Add(time.Second))
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.rounds) != 1 {
		t.Fatalf("%d rounds after two reads, want 1", len(m.rounds))
	}
	rise := m.rounds[0].by["mem"]
	const acquired = 5 + 2 + 2 + 1
	if rise == nil || rise.acquired != acquired || rise.lost != 1 || rise.wait[math.Inf(1)] != acquired || rise.handoff[math.Inf(1)] != 1 {
		t.Fatalf("counted %+v, want %d acquired, 1 lost, %d waits and 1 hand-off timed", rise, acquired, acquired)
	}
	steps := m.view.Windows["30000"]["mem"]
	if len(steps) != 1 || steps[0].Rate != acquired || steps[0].Lost != 1 || steps[0].P50 == nil || steps[0].P99 == nil || *steps[0].P99 < *steps[0].P50 ||
		steps[0].Handoffs != 1 || steps[0].HP50 == nil || steps[0].HP99 == nil || *steps[0].HP50 <= 0 || *steps[0].HP99 < *steps[0].HP50 {
		t.Fatalf("the 30s window's steps %+v, want one at %d a second, 1 lost, p50 ≤ p99, 1 hand-off", steps, acquired)
	}
	if s := m.view.Sources; len(s) != 2 || s[0].Error != "" || s[0].At == nil || s[1].Error == "" {
		t.Errorf("sources %+v, want the first read and the second failing", s)
	}

	var usage usageError
	if _, err := newAppMetrics([]string{"ftp://example.com/metrics"}, time.Second); !errors.As(err, &usage) {
		t.Errorf("an ftp URL: %v, want a usage error", err)
	}
}

// The applications' charts in a real browser, on etcd: an application's
// Lockers contend for a name and lose a hold to a force release from the
// page; the console, given the application's endpoint (--metrics), shows
// its backend's panel with acquisitions a second, the waits' p50 and
// p99, and the loss. Its screenshot is saved as console-apps.png (in
// $PADLOCK_SCREENSHOT_DIR if set).
func TestConsoleAppMetricsInBrowser(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	url := startEtcd(t, ctx)
	mp, endpoint := app(t)
	apps, err := newAppMetrics([]string{endpoint.URL}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c, err := newConsole(ctx, url, "web/", 50*time.Millisecond, true)
	if err != nil {
		t.Fatal(err)
	}
	c.deck.apps = apps
	srv := httptest.NewServer(c.handler())
	rctx, stop := context.WithCancel(ctx)
	go apps.run(rctx)
	go c.run(rctx)
	t.Cleanup(func() { stop(); srv.Close(); c.close() })
	bctx := openPage(t, ctx, srv.URL+"/", 1100, 900)

	open := func() *padlock.Locker {
		l, err := padlock.Open(ctx, url, padlock.WithTTL(15*time.Second), padlock.WithMeterProvider(mp))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	a, b := open(), open()
	// Three hand-offs, each to a waiter the console saw waiting: to
	// another Locker, which no application times, and to a's own waiter,
	// which a times; again until a's metrics show one timed (a waiter
	// whose queue watch was still loading at the release is not).
	for range 3 {
		handOff(t, ctx, a, b, "web/app")
	}
	timed := func() float64 {
		totals, err := apps.scrape(ctx, endpoint.URL)
		if err != nil {
			t.Fatal(err)
		}
		if totals["etcd"] == nil {
			return 0
		}
		return totals["etcd"].handoff[math.Inf(1)]
	}
	if n := timed(); n != 0 {
		t.Fatalf("%v hand-offs between two Lockers timed; want none", n)
	}
	for i := 0; i < 20 && timed() == 0; i++ {
		handOff(t, ctx, a, a, "web/app")
	}
	handoffs := timed()
	if handoffs == 0 {
		t.Fatal("no hand-off between holds of one Locker timed in 20")
	}
	// A hold lost to a force release from the page.
	lost, err := a.Lock(ctx, "web/lost")
	if err != nil {
		t.Fatal(err)
	}
	force := `fetch("unlock", {method: "POST", headers: {"X-Padlock-CSRF": document.querySelector("meta[name=csrf]").content,
		"Content-Type": "application/json"}, body: JSON.stringify({name: "web/lost"})}).then(r => r.status)`
	if status, err := chromedp.Run(bctx, chromedp.Evaluate[int](force, chromedp.EvalAwaitPromise)); err != nil || status != 200 {
		t.Fatalf("force unlock from the page: status %d, %v", status, err)
	}
	<-lost.Done()

	panel := `#apps g.backend[data-backend="etcd"]`
	most := func(sel string) string {
		return `Math.max(0, ...[...document.querySelectorAll(` + strconv.Quote(sel) + `)].map(e => Number(e.dataset.value)))`
	}
	waitTrue(t, bctx, "the application's acquisitions", most(panel+` circle.rate`)+` > 0`)
	waitTrue(t, bctx, "the waits' p50 and p99", most(panel+` circle.p99`)+` >= `+most(panel+` circle.p50`)+` && `+most(panel+` circle.p50`)+` > 0`)
	waitTrue(t, bctx, "the lost hold", `document.querySelector(`+strconv.Quote(panel+` path.lost`)+`) !== null`)
	waitTrue(t, bctx, "the timed hand-offs, all of them", most(panel+` circle.hp99`)+` >= `+most(panel+` circle.hp50`)+` && `+
		most(panel+` circle.hp50`)+` > 0 && document.querySelector(`+strconv.Quote(panel+` text.handoff`)+`)?.dataset.count === "`+
		strconv.FormatFloat(handoffs, 'f', -1, 64)+`"`)
	waitContains(t, bctx, "#apps-sources", "read ")
	zoom := `const w = document.getElementById("window"); w.value = "60000"; w.dispatchEvent(new Event("change")); w.value`
	if v, err := chromedp.Run(bctx, chromedp.Evaluate[string](zoom)); err != nil || v != "60000" {
		t.Fatalf("choosing the one-minute window: %q, %v", v, err)
	}
	waitContains(t, bctx, panel+` text.backend`, "etcd") // drawn again for the window
	saveScreenshot(t, bctx, "console-apps.png")
}

// handOff has a take name, b wait for it (seen by a's Holders), and a
// hand it on: two acquisitions by Lock, one of them after a wait.
func handOff(t *testing.T, ctx context.Context, a, b *padlock.Locker, name string) {
	t.Helper()
	held, err := a.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		lk, err := b.Lock(ctx, name)
		if err == nil {
			err = lk.Unlock(ctx)
		}
		got <- err
	}()
	padlocktest.WaitFor(t, "the waiter", time.Minute, func() bool {
		hs, err := a.Holders(ctx, name)
		return err == nil && len(hs) == 1 && hs[0].Waiters == 1
	})
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}
