// Package telemetry_test checks padlock's OpenTelemetry metrics and spans
// with the OpenTelemetry SDK, on the in-memory backend.
package telemetry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
	_ "github.com/padlock-go/padlock/memory"
	"github.com/padlock-go/padlock/padlocktest"
)

type collected struct {
	rm metricdata.ResourceMetrics
}

func collect(t *testing.T, r *sdkmetric.ManualReader) collected {
	t.Helper()
	var c collected
	if err := r.Collect(context.Background(), &c.rm); err != nil {
		t.Fatal(err)
	}
	return c
}

// sum returns the value of a counter or up-down counter (int64), or the
// count of a histogram, over the data points whose attributes include want.
func (c collected) sum(name string, want ...attribute.KeyValue) int64 {
	var n int64
	for _, sm := range c.rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if has(p.Attributes, want) {
						n += p.Value
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if has(p.Attributes, want) {
						n += int64(p.Count)
					}
				}
			}
		}
	}
	return n
}

func has(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

func outcome(s string) attribute.KeyValue { return attribute.String("padlock.outcome", s) }

// Locking, a refused TryLock, renewals and a lost hold show up in the
// metrics, with the backend and the outcome as attributes and never the
// lock's name; the spans carry the name and token, and a loss gets a span
// linked to the Lock that acquired the hold.
func TestMetricsAndSpans(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(ctx)

	url := "mem://telemetry?ttl=1s"
	l, err := padlock.Open(ctx, url, padlock.WithMeterProvider(mp), padlock.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	other, err := padlock.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	lk, err := l.Lock(ctx, "jobs/a")
	if err != nil {
		t.Fatal(err)
	}
	if c := collect(t, reader); c.sum("padlock.locks.held") != 1 {
		t.Errorf("locks.held while holding = %d, want 1", c.sum("padlock.locks.held"))
	}
	if _, err := l.TryLock(ctx, "jobs/a"); !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("TryLock = %v", err)
	}
	// Held past a renewal (a third of the TTL): a condition, polled.
	padlocktest.WaitFor(t, "a renewal counted", 30*time.Second, func() bool {
		return collect(t, reader).sum("padlock.renewals", outcome("ok")) > 0
	})
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lost, err := l.Lock(ctx, "jobs/b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.ForceUnlock(ctx, "jobs/b"); err != nil {
		t.Fatal(err)
	}
	<-lost.Done()
	// Done closes before the loss is recorded (no provider's code may delay
	// Done): wait for the record, a condition, polled.
	backend := attribute.String("padlock.backend", "mem")
	recorded := func() bool {
		c := collect(t, reader)
		ended := false
		for _, s := range spans.Ended() {
			ended = ended || s.Name() == "padlock.lost"
		}
		return ended && c.sum("padlock.locks.lost", backend) > 0 && c.sum("padlock.hold.duration", outcome("lost")) > 0
	}
	// Until recorded, or 30s: the checks below say what is missing.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	conformance.Poll(wctx, 10*time.Millisecond, recorded)
	cancel()

	c := collect(t, reader)
	for _, check := range []struct {
		name  string
		attrs []attribute.KeyValue
		want  int64
	}{
		{"padlock.acquire.duration", []attribute.KeyValue{backend, outcome("acquired"), attribute.String("padlock.operation", "Lock")}, 2},
		{"padlock.acquire.duration", []attribute.KeyValue{outcome("not_acquired"), attribute.String("padlock.operation", "TryLock")}, 1},
		{"padlock.wait.duration", nil, 2},
		{"padlock.hold.duration", []attribute.KeyValue{outcome("released")}, 1},
		{"padlock.hold.duration", []attribute.KeyValue{outcome("lost")}, 1},
		{"padlock.locks.held", nil, 0},
		{"padlock.locks.lost", []attribute.KeyValue{backend}, 1},
	} {
		if got := c.sum(check.name, check.attrs...); got != check.want {
			t.Errorf("%s %v = %d, want %d", check.name, check.attrs, got, check.want)
		}
	}
	for _, sm := range c.rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "padlock.acquire.duration" {
				for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
					if _, ok := p.Attributes.Value("padlock.lock.name"); ok {
						t.Errorf("a metric carries the lock name: %v", p.Attributes)
					}
				}
			}
		}
	}

	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans.Ended() {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	if n := len(byName["padlock.Lock"]); n != 2 {
		t.Fatalf("%d padlock.Lock spans, want 2", n)
	}
	first := byName["padlock.Lock"][0]
	if !hasAttr(first, "padlock.lock.name", attribute.StringValue("jobs/a")) ||
		!hasAttr(first, "padlock.lock.token", attribute.Int64Value(int64(lk.Token()))) {
		t.Errorf("Lock span attributes %v", first.Attributes())
	}
	if len(byName["padlock.TryLock"]) != 1 || len(byName["padlock.Unlock"]) != 1 {
		t.Errorf("spans: %d TryLock, %d Unlock; want 1 each", len(byName["padlock.TryLock"]), len(byName["padlock.Unlock"]))
	}
	lostSpans := byName["padlock.lost"]
	if len(lostSpans) != 1 {
		t.Fatalf("%d padlock.lost spans, want 1", len(lostSpans))
	}
	second := byName["padlock.Lock"][1]
	if links := lostSpans[0].Links(); len(links) != 1 || links[0].SpanContext.SpanID() != second.SpanContext().SpanID() {
		t.Errorf("the loss span links %v, want the Lock span that acquired the hold", links)
	}
}

func hasAttr(s sdktrace.ReadOnlySpan, key string, v attribute.Value) bool {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key && kv.Value == v {
			return true
		}
	}
	return false
}

// The duration histograms resolve what locks take: their buckets run from
// 100µs or less (an uncontended acquisition on a loopback server) to a
// minute or more, no bound more than 3× the one before it, so a quantile
// read from them is within a step of the truth. The SDK's default
// boundaries, made for milliseconds, put everything under five seconds in
// one bucket.
func TestDurationBuckets(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	l, err := padlock.Open(ctx, "mem://buckets", padlock.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lk, err := l.Lock(ctx, "jobs/a")
	if err != nil {
		t.Fatal(err)
	}
	// A hand-off to a waiter of the same Locker, seen waiting on the
	// in-memory server, is timed.
	next := make(chan error, 1)
	go func() {
		lk, err := l.Lock(ctx, "jobs/a")
		if err == nil {
			err = lk.Unlock(ctx)
		}
		next <- err
	}()
	padlocktest.WaitFor(t, "the waiter", 30*time.Second, func() bool {
		hs, err := l.Holders(ctx, "jobs/a")
		return err == nil && len(hs) == 1 && hs[0].Waiters == 1
	})
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-next; err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, sm := range collect(t, reader).rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				continue
			}
			for _, p := range h.DataPoints {
				seen[m.Name] = true
				b := p.Bounds
				if len(b) == 0 || b[0] > 0.0001 || b[len(b)-1] < 60 {
					t.Errorf("%s: bounds %v, want from 100µs or less to a minute or more", m.Name, b)
				}
				for i := 1; i < len(b); i++ {
					if b[i] > 3*b[i-1] {
						t.Errorf("%s: bound %v after %v, more than 3× it", m.Name, b[i], b[i-1])
					}
				}
			}
		}
	}
	for _, name := range []string{"padlock.acquire.duration", "padlock.wait.duration", "padlock.hold.duration", "padlock.handoff.duration"} {
		if !seen[name] {
			t.Errorf("no data point of %s", name)
		}
	}
}
