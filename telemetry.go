package padlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// instrumentationScope names padlock's meter and tracer.
const instrumentationScope = "github.com/padlock-go/padlock"

// telemetry is a Locker's OpenTelemetry instruments. By default they come
// from the global providers, so an application that set those up gets
// padlock's metrics and spans with no code; with no providers set they do
// nothing (BenchmarkTelemetryCost measures what that costs). Lock names
// are unbounded, so they are never metric attributes; spans carry them.
type telemetry struct {
	tracer  trace.Tracer
	backend attribute.KeyValue
	// Attribute sets, and the option slices that carry them, built once:
	// a measurement then allocates nothing.
	onBackend measure
	byOutcome map[string]measure            // hold and renewal outcomes
	byCall    map[string]map[string]measure // acquire: operation, outcome
	acquire   metric.Float64Histogram       // every Lock/TryLock call, by outcome
	wait      metric.Float64Histogram       // Lock calls that acquired: how long they waited
	handoff   metric.Float64Histogram       // release to the next grant, between holds of one Locker
	hold      metric.Float64Histogram       // how long holds lasted, by how they ended
	held      metric.Int64UpDownCounter     // holds now
	lost      metric.Int64Counter           // holds lost
	renewals  metric.Int64Counter           // renewals, by outcome
}

// Attribute keys of padlock's metrics and spans.
const (
	attrBackend   = attribute.Key("padlock.backend")
	attrOperation = attribute.Key("padlock.operation")
	attrOutcome   = attribute.Key("padlock.outcome")
	attrName      = attribute.Key("padlock.lock.name") // spans only
	attrToken     = attribute.Key("padlock.lock.token")
)

func newTelemetry(mp metric.MeterProvider, tp trace.TracerProvider, backend string) *telemetry {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	m := mp.Meter(instrumentationScope)
	t := &telemetry{tracer: tp.Tracer(instrumentationScope), backend: attrBackend.String(backend),
		byOutcome: map[string]measure{}, byCall: map[string]map[string]measure{}}
	t.onBackend = measureWith(t.backend)
	for _, o := range []string{"released", "lost", "closed", "ok", "failed"} {
		t.byOutcome[o] = measureWith(t.backend, attrOutcome.String(o))
	}
	for _, op := range acquireOps {
		t.byCall[op] = map[string]measure{}
		for _, o := range acquireOutcomes {
			t.byCall[op][o] = measureWith(t.backend, attrOperation.String(op), attrOutcome.String(o))
		}
	}
	// Instrument errors only come with invalid names, which these are not;
	// a failed instrument is a no-op one.
	t.acquire, _ = m.Float64Histogram("padlock.acquire.duration", metric.WithUnit("s"), durationBuckets,
		metric.WithDescription("Duration of Lock, TryLock, RLock, TryRLock and LockAll calls (one per name), by outcome."))
	t.wait, _ = m.Float64Histogram("padlock.wait.duration", metric.WithUnit("s"), durationBuckets,
		metric.WithDescription("Time a Lock, RLock or LockAll call that acquired spent from asking to holding (LockAll: per name)."))
	t.handoff, _ = m.Float64Histogram("padlock.handoff.duration", metric.WithUnit("s"), durationBuckets,
		metric.WithDescription("Hand-offs between this Locker's own exclusive holds: from the release being sent to a waiting Lock call holding the name next (the driver proves nobody came between)."))
	t.hold, _ = m.Float64Histogram("padlock.hold.duration", metric.WithUnit("s"), durationBuckets,
		metric.WithDescription("How long holds lasted, by how they ended: released, lost or closed."))
	t.held, _ = m.Int64UpDownCounter("padlock.locks.held", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks held now."))
	t.lost, _ = m.Int64Counter("padlock.locks.lost", metric.WithUnit("{lock}"),
		metric.WithDescription("Holds lost before their Unlock: Done closed with ErrLost."))
	t.renewals, _ = m.Int64Counter("padlock.renewals", metric.WithUnit("{renewal}"),
		metric.WithDescription("Renewals of holds, by outcome: ok, failed (retried) or lost."))
	return t
}

// durationBuckets are the bucket boundaries, in seconds, of padlock's
// duration histograms. The SDK's default boundaries (0, 5, 10, 25, …,
// 10000) are made for milliseconds: in seconds they put every acquisition
// of a loopback server (0.1–1 ms), and every wait under a second, in one
// bucket, where no quantile can be read. These run from 100µs, an
// uncontended acquisition on Redis, to 5 minutes, a long hold, at about
// 2.5 steps a decade, so a quantile read from them (Prometheus's
// histogram_quantile, the console's charts) is within a step of the truth.
// A View (sdkmetric.WithView) may still replace them.
var durationBuckets = metric.WithExplicitBucketBoundaries(
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
	0.25, 0.5, 1, 2.5, 5, 10, 25, 60, 150, 300)

// measure is one attribute set as the options of a Record and of an Add.
type measure struct {
	record []metric.RecordOption
	add    []metric.AddOption
}

func measureWith(kvs ...attribute.KeyValue) measure {
	o := metric.WithAttributeSet(attribute.NewSet(kvs...))
	return measure{record: []metric.RecordOption{o}, add: []metric.AddOption{o}}
}

// backendName names a driver for metrics when Open did not (NewLocker):
// its package, as in "etcd" for *etcd.driver.
func backendName(drv any) string {
	t := strings.TrimPrefix(fmt.Sprintf("%T", drv), "*")
	if pkg, _, ok := strings.Cut(t, "."); ok {
		return pkg
	}
	return t
}

// startAcquire starts the span of a Lock or TryLock call. Attributes are
// set only on a span that records: with no provider, a call costs next to
// nothing (BenchmarkTelemetryCost).
func (t *telemetry) startAcquire(ctx context.Context, op, name string) (context.Context, trace.Span) {
	ctx, span := t.tracer.Start(ctx, spanNames[op], clientKind...)
	if span.IsRecording() {
		span.SetAttributes(t.backend, attrName.String(name))
	}
	return ctx, span
}

var (
	spanNames = map[string]string{"Lock": "padlock.Lock", "TryLock": "padlock.TryLock",
		"RLock": "padlock.RLock", "TryRLock": "padlock.TryRLock", "LockAll": "padlock.LockAll", "Campaign": "padlock.Campaign"}
	acquireOps = []string{"Lock", "TryLock", "RLock", "TryRLock", "LockAll", "Campaign"}
	clientKind = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)} // made once: options allocate
)

// endAcquire records a finished Lock or TryLock call.
func (t *telemetry) endAcquire(ctx context.Context, span trace.Span, op string, start time.Time, lk *Lock, err error) {
	elapsed := time.Since(start).Seconds()
	outcome := acquireOutcome(err)
	t.acquire.Record(ctx, elapsed, t.byCall[op][outcome].record...)
	if err == nil && op != "TryLock" && op != "TryRLock" {
		t.wait.Record(ctx, elapsed, t.onBackend.record...)
	}
	if span.IsRecording() {
		span.SetAttributes(attrOutcome.String(outcome))
		if lk != nil {
			span.SetAttributes(attrToken.Int64(int64(lk.Token())))
		}
		if err != nil && outcome != "not_acquired" {
			span.RecordError(err)
			span.SetStatus(codes.Error, outcome)
		}
	}
	span.End()
}

var acquireOutcomes = []string{"acquired", "not_acquired", "timeout", "unavailable", "closed", "cancelled", "invalid", "error"}

func acquireOutcome(err error) string {
	switch {
	case err == nil:
		return "acquired"
	case errors.Is(err, ErrNotAcquired):
		return "not_acquired"
	case errors.Is(err, ErrTimeout):
		return "timeout"
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	case errors.Is(err, ErrClosed):
		return "closed"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, ErrInvalidName), errors.Is(err, ErrInvalidOption):
		return "invalid"
	}
	return "error"
}

// holdStarted counts a new hold.
func (t *telemetry) holdStarted(ctx context.Context) {
	t.held.Add(ctx, 1, t.onBackend.add...)
}

// recordEnd records how a hold ended (reason nil: Unlock) and, for a lost
// hold, a span that says so, linked to the span of the call that acquired
// it.
func (h *hold) recordEnd(reason error) {
	t := h.l.tel
	ctx := context.Background()
	outcome := "released"
	switch {
	case errors.Is(reason, ErrLost):
		outcome = "lost"
	case reason != nil:
		outcome = "closed"
	}
	t.held.Add(ctx, -1, t.onBackend.add...)
	t.hold.Record(ctx, time.Since(h.since).Seconds(), t.byOutcome[outcome].record...)
	if outcome != "lost" {
		return
	}
	t.lost.Add(ctx, 1, t.onBackend.add...)
	h.l.log.Warn("padlock: lock lost", "lock", h.name, "token", h.token, "err", reason)
	_, span := t.tracer.Start(ctx, "padlock.lost", trace.WithLinks(trace.Link{SpanContext: h.acquiredBy}),
		trace.WithAttributes(t.backend, attrName.String(h.name), attrToken.Int64(int64(h.token))))
	span.AddEvent("padlock.lost", trace.WithAttributes(attribute.String("padlock.reason", reason.Error())))
	span.SetStatus(codes.Error, "lock lost")
	span.End()
}

// renewed counts renewal outcomes.
func (t *telemetry) renewed(ok, failed, lost int) {
	ctx := context.Background()
	for _, c := range []struct {
		n       int
		outcome string
	}{{ok, "ok"}, {failed, "failed"}, {lost, "lost"}} {
		if c.n > 0 {
			t.renewals.Add(ctx, int64(c.n), t.byOutcome[c.outcome].add...)
		}
	}
}
