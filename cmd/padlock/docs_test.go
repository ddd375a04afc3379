package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/padlock-go/padlock/bench"
	"github.com/padlock-go/padlock/faults"
)

// docsDir is the repository's docs/, from this package's directory.
const docsDir = "../../docs"

// The generated sections of docs/benchmarks.md are what the committed
// results their markers name render to, charts included: a hand edit, or
// results changed without rendering the page again, fail here.
func TestBenchmarksDocGenerated(t *testing.T) {
	path := filepath.Join(docsDir, "benchmarks.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	srcs := bench.DocSources(doc)
	if len(srcs) == 0 {
		t.Fatalf("%s has no generated section", path)
	}
	got, err := bench.RenderDoc(doc, docsDir, func(src string) (*bench.Report, error) {
		return bench.ReadFile(filepath.Join(docsDir, src))
	})
	if err != nil {
		t.Fatal(err)
	}
	compareDoc(t, path, doc, got, "go run ./cmd/padlock bench --docs docs/benchmarks.md")
	for _, src := range srcs {
		rep, err := bench.ReadFile(filepath.Join(docsDir, src))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Host.OS == "" || rep.Command == "" {
			t.Errorf("%s records no host or no command: %+v, %q", src, rep.Host, rep.Command)
		}
	}
	for _, src := range bench.ChartedSources(doc) {
		rep, err := bench.ReadFile(filepath.Join(docsDir, src))
		if err != nil {
			t.Fatal(err)
		}
		charts, err := rep.ChartsIn(filepath.Join(docsDir, filepath.Dir(src), "charts"))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range charts {
			for _, f := range []string{c.SVG, c.PNG} {
				if st, err := os.Stat(f); err != nil || st.Size() == 0 {
					t.Errorf("chart %s of %s: %v (go run ./cmd/padlock bench --from %s)", f, src, err, filepath.Join("docs", src))
				}
			}
		}
	}
}

// The generated sections of every other page of docs/ (a recipe's
// measured table; the benchmarks of etcd.md, zookeeper.md, redis.md,
// sql.md and operations.md; guarantees.md's speed table)
// are what the committed results their markers name render to.
func TestOtherDocsGenerated(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join(docsDir, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	rendered := 0
	for _, path := range pages {
		doc, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(path) == "benchmarks.md" || !strings.Contains(string(doc), "<!-- bench:") {
			continue
		}
		got, err := bench.RenderDoc(doc, docsDir, func(src string) (*bench.Report, error) {
			return bench.ReadFile(filepath.Join(docsDir, src))
		})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		compareDoc(t, path, doc, got, "go run ./cmd/padlock bench --docs docs/"+filepath.Base(path))
		rendered++
	}
	// readwrite, semaphore, election, etcd, zookeeper, redis, sql,
	// operations and guarantees at least.
	if rendered < 9 {
		t.Errorf("%d pages besides benchmarks.md have generated sections, want at least 9", rendered)
	}
}

// The generated sections of docs/guarantees.md and docs/lost-lock.md are
// what the fault suite's committed results render to.
func TestFaultDocsGenerated(t *testing.T) {
	f, err := os.Open(filepath.Join(docsDir, "faults", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := faults.ReadReport(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Host.OS == "" || rep.Command == "" {
		t.Errorf("docs/faults/results.json records no host or no command: %+v, %q", rep.Host, rep.Command)
	}
	for _, name := range splitList(faultsDocs) {
		path := filepath.Join("../..", name)
		doc, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := faults.RenderDoc(doc, rep)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		compareDoc(t, path, doc, got, "go run ./cmd/padlock faults --from "+faultsResults+" --docs "+faultsDocs)
	}
}

// compareDoc fails t if the document differs from its rendering, naming
// the first line that differs and the command that renders it.
func compareDoc(t *testing.T, path string, doc, rendered []byte, fix string) {
	t.Helper()
	if string(doc) == string(rendered) {
		return
	}
	a, b := strings.Split(string(doc), "\n"), strings.Split(string(rendered), "\n")
	for i := 0; i < max(len(a), len(b)); i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			t.Errorf("%s:%d differs from what its results render:\n have %q\n want %q\n(%s renders it)", path, i+1, x, y, fix)
			return
		}
	}
}
