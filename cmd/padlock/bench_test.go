package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/bench"
	"github.com/padlock-go/padlock/padlocktest"
)

// TestBenchOutputs runs padlock bench against a Redis server it is given
// by URL and checks every output: the table, results.json (every
// implementation, with acquisitions), results.csv, the charts, and the
// generated section of a docs file.
func TestBenchOutputs(t *testing.T) {
	srv := padlocktest.Start(t, padlocktest.Redis)
	dir := t.TempDir()
	doc := filepath.Join(dir, "benchmarks.md")
	os.WriteFile(doc, []byte("# head\n\n"+bench.RunMarker("results.json")+"\nold\n"+bench.EndMarker+"\ntail\n"), 0o644)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := runBench(ctx, []string{"--url", srv.URL(), "--workloads", "U1,C1", "--waiters", "2", "--holds", "1ms", "--thinks", "0",
		"--duration", "200ms", "--rounds", "1", "--quiet", "--out", dir, "--docs", doc}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "redis U1") || !strings.Contains(out.String(), "speed vs floor") {
		t.Errorf("table:\n%s", out.String())
	}
	var rep bench.Report
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	impls := map[string]bool{}
	for _, r := range rep.Results {
		if r.Acquisitions > 0 {
			impls[r.Impl] = true
		}
	}
	for _, want := range []string{"rtt", "floor", "padlock", "padlock-fair", "redsync", "redsync-10ms", "bsm-redislock"} {
		if !impls[want] {
			t.Errorf("results.json: no acquisitions of %s", want)
		}
	}
	csv, err := os.ReadFile(filepath.Join(dir, "results.csv"))
	if err != nil || strings.Count(string(csv), "\n") != len(rep.Results)+1 {
		t.Errorf("results.csv: %d lines for %d results (%v)", strings.Count(string(csv), "\n"), len(rep.Results), err)
	}
	for _, f := range []string{"redis-handoff.svg", "redis-handoff.png", "redis-cdf.svg", "redis-cdf.png"} {
		if st, err := os.Stat(filepath.Join(dir, "charts", f)); err != nil || st.Size() == 0 {
			t.Errorf("chart %s: %v", f, err)
		}
	}
	// --from renders the same results again, with no servers.
	again := filepath.Join(dir, "again")
	if err := runBench(ctx, []string{"--from", filepath.Join(dir, "results.json"), "--out", again}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if b2, err := os.ReadFile(filepath.Join(again, "results.csv")); err != nil || string(b2) != string(csv) {
		t.Errorf("--from: results.csv differs (%v)", err)
	}
	md, _ := os.ReadFile(doc)
	if s := string(md); strings.Contains(s, "\nold\n") || !strings.Contains(s, "charts/redis-cdf.svg") || !strings.HasSuffix(s, bench.EndMarker+"\ntail\n") ||
		!strings.Contains(s, "by `padlock bench --url … --workloads U1,C1 --waiters 2 --holds 1ms --thinks 0 --duration 200ms --rounds 1`") {
		t.Errorf("docs file:\n%s", s)
	}
	// --docs alone renders the document again from the results its
	// markers name: the same document.
	if err := runBench(ctx, []string{"--docs", doc}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if md2, _ := os.ReadFile(doc); string(md2) != string(md) {
		t.Errorf("--docs alone changed the document:\n%s\nwas:\n%s", md2, md)
	}
	// A run whose results no section of the document names is refused.
	err = runBench(ctx, []string{"--from", filepath.Join(dir, "results.json"), "--out", again, "--docs", doc}, &bytes.Buffer{})
	if !errors.Is(err, bench.ErrInvalid) || !strings.Contains(err.Error(), "no section rendered from") {
		t.Errorf("--docs with a run the document does not name: %v", err)
	}
}

func TestBenchBadInput(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		args []string
		want error
	}{
		{[]string{}, nil},
		{[]string{"--local", "--url", "redis://x"}, nil},
		{[]string{"--url", "gopher://x"}, padlock.ErrUnknownScheme},
		{[]string{"--local", "--backends", "cassandra"}, padlock.ErrInvalidOption},
		{[]string{"--url", "redis://x", "--waiters", "0"}, padlock.ErrInvalidOption},
		{[]string{"--url", "redis://x", "--holds", "soon"}, padlock.ErrInvalidOption},
		{[]string{"--url", "redis://x", "--readers", "0"}, padlock.ErrInvalidOption},
		{[]string{"--url", "redis://x", "--readers", "1.5"}, padlock.ErrInvalidOption},
	} {
		err := runBench(ctx, c.args, &bytes.Buffer{})
		var ue usageError
		switch {
		case err == nil:
			t.Errorf("%q: no error", c.args)
		case c.want == nil && !errors.As(err, &ue):
			t.Errorf("%q: %v, want a usage error", c.args, err)
		case c.want != nil && !errors.Is(err, c.want):
			t.Errorf("%q: %v, want %v", c.args, err, c.want)
		}
	}
}

func TestSplitURLs(t *testing.T) {
	got := splitURLs("etcd://a:2379,b:2379/p, redis://c:6379,redlock://d,e,f")
	want := []string{"etcd://a:2379,b:2379/p", "redis://c:6379", "redlock://d,e,f"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("splitURLs = %q, want %q", got, want)
	}
}
