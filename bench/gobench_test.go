package bench

import (
	"errors"
	"testing"
)

func TestParseGoBench(t *testing.T) {
	out := []byte(`goos: linux
BenchmarkContended/padlock-2     	     393	   3073144 ns/op	      1338 handoff-p50-µs	         0.4742 utilisation
BenchmarkContended/padlock-2     	     376	   3201603 ns/op	      1397 handoff-p50-µs	         0.4724 utilisation
BenchmarkAcquireOverDeadKeys/dead=1000-2	297	4301437 ns/op	0.9558 speed-vs-mutex
PASS
`)
	g, err := ParseGoBench(out, "out.txt")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(g["Contended/padlock"]); n != 2 {
		t.Fatalf("Contended/padlock: %d runs, want 2 (%v)", n, g)
	}
	if got := g.Span("Contended/padlock", "handoff-p50-µs", usAsMs); got != "1.34 ms–1.40 ms" {
		t.Errorf("Span = %q", got)
	}
	if got := g.Span("AcquireOverDeadKeys/dead=1000", "speed-vs-mutex", ratioX); got != "0.96×" {
		t.Errorf("Span of one run = %q", got)
	}
	if got := g.Span("Contended/padlock", "no-such-unit", ratioX); got != "-" {
		t.Errorf("Span of a missing metric = %q, want -", got)
	}
	if _, err := ParseGoBench([]byte("PASS\n"), "empty.txt"); !errors.Is(err, ErrInvalid) {
		t.Errorf("output without results: %v, want ErrInvalid", err)
	}
}
