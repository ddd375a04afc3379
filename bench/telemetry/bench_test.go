// Package telemetry_test measures what padlock's OpenTelemetry
// instrumentation costs.
package telemetry_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/bench/benchutil"
	_ "github.com/padlock-go/padlock/memory"
)

// BenchmarkTelemetryCost measures what instrumentation costs a Lock+Unlock
// cycle on the in-memory backend (the cheapest there is, so the cost shows
// most): with no provider configured (the global no-op ones) and with the
// OpenTelemetry SDK recording metrics and sampling every span. Compare the
// difference with a real backend's cycle (docs/operations.md).
//
//	go test -run '^$' -bench TelemetryCost ./bench/telemetry
func BenchmarkTelemetryCost(b *testing.B) {
	ctx := context.Background()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(ctx)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer tp.Shutdown(ctx)
	plain := benchutil.Open(b, "mem://telemetry-bench")
	sdk, err := padlock.Open(ctx, "mem://telemetry-bench", padlock.WithMeterProvider(mp), padlock.WithTracerProvider(tp))
	if err != nil {
		b.Fatal(err)
	}
	defer sdk.Close()
	benchutil.SideBySide(b,
		benchutil.Variant{Name: "no-provider", Op: benchutil.Cycle(ctx, plain, "a")},
		benchutil.Variant{Name: "sdk", Op: benchutil.Cycle(ctx, sdk, "b")},
	)
}
