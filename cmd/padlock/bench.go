package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/bench"
	"github.com/padlock-go/padlock/padlocktest"
)

// runBench runs the benchmark (`padlock bench`): padlock against the wire
// floors and the native clients, on the user's servers (--url) or on local
// ones it starts (--local).
func runBench(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	urls := fs.String("url", "", "padlock URLs of the servers to measure, comma-separated (etcd://, redis://, redis+cluster://, redlock://, zk://, postgres://, mysql://)")
	local := fs.Bool("local", false, "start local servers as the tests do (padlocktest) and measure them")
	kinds := fs.String("backends", "all", "with --local: which servers, comma-separated (all: every one but redis+sentinel): "+kindNames())
	workloads := fs.String("workloads", strings.Join(bench.Workloads, ","), "comma-separated workloads: U1 (uncontended), U2 (distinct names), C1 (one hot name), C2 (Zipfian), R1 (readers and writers: --readers), S1 (semaphore), E1 (election)")
	impls := fs.String("impls", "", "only these implementations, comma-separated (padlock, floor, rtt, redsync, ...)")
	duration := fs.Duration("duration", 2*time.Second, "each implementation's turn on each cell, per round")
	rounds := fs.Int("rounds", 2, "turns of each implementation on each cell, interleaved")
	clients := fs.String("clients", "", "U2's client counts (default 1,2,4,8,16,64)")
	waiters := fs.String("waiters", "", "C1's waiter counts (default 2,4,8,32)")
	holds := fs.String("holds", "", "C1's hold times (default 0,1ms,10ms)")
	thinks := fs.String("thinks", "", "C1's think times (default 0,1ms)")
	readers := fs.Float64("readers", 0.9, "R1's share of acquisitions that are readers, above 0 and at most 1 (1: readers only)")
	dir := fs.String("out", "bench-results", "directory for results.json, results.csv and the charts")
	docs := fs.String("docs", "", "Markdown files, comma-separated, whose generated sections are rendered from the results files their markers name (docs/benchmarks.md,docs/readwrite.md,...); alone, it renders them from those files without running")
	quiet := fs.Bool("quiet", false, "no progress bar")
	from := fs.String("from", "", "render the outputs of an earlier run's results.json (into --out, by default its own directory) instead of running")
	fs.SetOutput(os.Stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	outSet := false
	fs.Visit(func(f *flag.Flag) { outSet = outSet || f.Name == "out" })
	if *from != "" {
		if *urls != "" || *local {
			return usageError{fmt.Errorf("--from renders an earlier run: it takes neither --url nor --local")}
		}
		rep, err := bench.ReadFile(*from)
		if err != nil {
			return err
		}
		if !outSet {
			*dir = filepath.Dir(*from)
		}
		return writeBench(rep, out, *dir, *docs, *from)
	}
	if *docs != "" && *urls == "" && !*local {
		for _, d := range splitList(*docs) {
			if err := bench.UpdateDoc(d); err != nil {
				return err
			}
			fmt.Fprintf(out, "padlock bench: rendered %s from its results files\n", d)
		}
		return nil
	}
	if (*urls == "") == !*local {
		return usageError{fmt.Errorf("give --url URL[,URL...] or --local")}
	}
	cfg := bench.Config{Duration: *duration, Rounds: *rounds, Matrix: bench.DefaultMatrix(), Workloads: splitList(*workloads), Impls: splitList(*impls),
		Command: commandLine("padlock bench", fs, args, []string{"out", "docs", "quiet", "from"}, []string{"url"})}
	// What Run would refuse, refused before any server is opened or
	// started.
	if *duration <= 0 || *rounds < 1 {
		return usageError{fmt.Errorf("%w: --duration and --rounds must be positive", padlock.ErrInvalidOption)}
	}
	for _, w := range cfg.Workloads {
		if !slices.Contains(bench.Workloads, w) {
			return usageError{fmt.Errorf("%w: --workloads: %q (want %s)", padlock.ErrInvalidOption, w, strings.Join(bench.Workloads, ", "))}
		}
	}
	var err error
	if cfg.Matrix.U2Clients, err = intList(*clients, cfg.Matrix.U2Clients); err != nil {
		return usageError{fmt.Errorf("--clients: %w", err)}
	}
	if cfg.Matrix.C1Waiters, err = intList(*waiters, cfg.Matrix.C1Waiters); err != nil {
		return usageError{fmt.Errorf("--waiters: %w", err)}
	}
	if cfg.Matrix.C1Holds, err = durationList(*holds, cfg.Matrix.C1Holds); err != nil {
		return usageError{fmt.Errorf("--holds: %w", err)}
	}
	if cfg.Matrix.C1Thinks, err = durationList(*thinks, cfg.Matrix.C1Thinks); err != nil {
		return usageError{fmt.Errorf("--thinks: %w", err)}
	}
	if !(*readers > 0 && *readers <= 1) {
		return usageError{fmt.Errorf("%w: --readers %v: want a share above 0 and at most 1", padlock.ErrInvalidOption, *readers)}
	}
	cfg.Matrix.R1Readers = *readers
	if *local {
		ks, err := localKinds(*kinds)
		if err != nil {
			return usageError{err}
		}
		fmt.Fprintf(out, "padlock bench: starting %d local servers\n", len(ks))
		groups, closeAll, err := bench.Local(ctx, ks)
		if err != nil {
			return err
		}
		defer closeAll()
		cfg.Groups = groups
	} else {
		for _, u := range splitURLs(*urls) {
			g, err := bench.Open(ctx, u)
			if err != nil {
				return asUsage(err)
			}
			defer g.Close()
			cfg.Groups = append(cfg.Groups, g)
		}
	}
	if !*quiet {
		var bar *progressbar.ProgressBar
		cfg.Progress = func(done, total int, what string) {
			if bar == nil {
				bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionShowCount(),
					progressbar.OptionSetWidth(30), progressbar.OptionSetPredictTime(true), progressbar.OptionClearOnFinish())
			}
			bar.Describe(fmt.Sprintf("%-48.48s", what))
			bar.Set(done)
		}
	}
	rep, err := bench.Run(ctx, cfg)
	if errors.Is(err, bench.ErrInvalid) {
		return usageError{err} // --impls that match nothing, say
	}
	if err != nil {
		return err
	}
	return writeBench(rep, out, *dir, *docs, "")
}

// writeBench prints the report's table and writes its files: results.json
// (unless it is from, the file the report was read from) and results.csv
// in dir, the charts in dir/charts; then, if docs is set, renders its
// generated sections, one of which must be rendered from dir/results.json.
func writeBench(rep *bench.Report, out io.Writer, dir, docs, from string) error {
	if err := rep.WriteTable(out); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	results := filepath.Join(dir, "results.json")
	files := map[string]func(io.Writer) error{results: rep.WriteJSON, filepath.Join(dir, "results.csv"): rep.WriteCSV}
	if from != "" && samePath(from, results) {
		delete(files, results)
	}
	for name, write := range files {
		if err := writeFile(name, write); err != nil {
			return err
		}
	}
	charts, err := rep.WriteCharts(filepath.Join(dir, "charts"))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\npadlock bench: wrote %s/results.json, results.csv and %d charts (SVG and PNG) in %s/charts\n", dir, len(charts), dir)
	if docs == "" {
		return nil
	}
	found := false
	for _, d := range splitList(docs) {
		doc, err := os.ReadFile(d)
		if err != nil {
			return err
		}
		for _, src := range bench.DocSources(doc) {
			found = found || samePath(filepath.Join(filepath.Dir(d), src), results)
		}
	}
	if !found {
		return fmt.Errorf("%w: %s has no section rendered from %s (a marker %q)", bench.ErrInvalid, docs, results,
			bench.RunMarker("RESULTS"))
	}
	for _, d := range splitList(docs) {
		if err := bench.UpdateDoc(d); err != nil {
			return err
		}
		fmt.Fprintf(out, "padlock bench: rendered %s\n", d)
	}
	return nil
}

// samePath reports whether a and b name the same file.
func samePath(a, b string) bool {
	x, errA := filepath.Abs(a)
	y, errB := filepath.Abs(b)
	return errA == nil && errB == nil && x == y
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// splitURLs splits a comma-separated list of URLs whose own host lists may
// hold commas (etcd://a:2379,b:2379/): a piece without "://" belongs to
// the URL before it.
func splitURLs(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		switch {
		case p == "":
		case strings.Contains(p, "://") || len(out) == 0:
			out = append(out, p)
		default:
			out[len(out)-1] += "," + p
		}
	}
	return out
}

// commandLine is the command line of a run, for its results: name, then
// the flags of args that fs set, in their order and with their values
// (those of redact shown as …), leaving out those of skip (where the
// outputs go).
func commandLine(name string, fs *flag.FlagSet, args, skip, redact []string) string {
	type flagAt struct {
		pos int
		s   string
	}
	var set []flagAt
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains(skip, f.Name) {
			return
		}
		pos := slices.IndexFunc(args, func(a string) bool {
			n, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			return strings.HasPrefix(a, "-") && n == f.Name
		})
		s := "--" + f.Name
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
			v := f.Value.String()
			if slices.Contains(redact, f.Name) {
				v = "…"
			}
			s += " " + v
		}
		set = append(set, flagAt{pos, s})
	})
	slices.SortStableFunc(set, func(a, b flagAt) int { return a.pos - b.pos })
	cmd := []string{name}
	for _, f := range set {
		cmd = append(cmd, f.s)
	}
	return strings.Join(cmd, " ")
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func intList(s string, def []int) ([]int, error) {
	if s == "" {
		return def, nil
	}
	var out []int
	for _, p := range splitList(s) {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%w: %q is not a positive count", padlock.ErrInvalidOption, p)
		}
		out = append(out, n)
	}
	return out, nil
}

func durationList(s string, def []time.Duration) ([]time.Duration, error) {
	if s == "" {
		return def, nil
	}
	var out []time.Duration
	for _, p := range splitList(s) {
		d, err := time.ParseDuration(p)
		if p == "0" {
			d, err = 0, nil
		}
		if err != nil || d < 0 {
			return nil, fmt.Errorf("%w: %q is not a duration", padlock.ErrInvalidOption, p)
		}
		out = append(out, d)
	}
	return out, nil
}

func kindNames() string {
	var names []string
	for _, k := range allKinds() {
		names = append(names, string(k))
	}
	return strings.Join(names, ",")
}

// allKinds are the servers --local can start: the default ones, and the
// ones it starts only when asked.
func allKinds() []padlocktest.Kind {
	return append(slices.Clone(bench.LocalKinds), bench.ExtraKinds...)
}

func localKinds(s string) ([]padlocktest.Kind, error) {
	if s == "all" {
		return bench.LocalKinds, nil
	}
	var out []padlocktest.Kind
	for _, p := range splitList(s) {
		found := false
		for _, k := range allKinds() {
			if strings.EqualFold(p, string(k)) {
				out, found = append(out, k), true
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: --backends: %q (want %s)", padlock.ErrInvalidOption, p, kindNames())
		}
	}
	return out, nil
}
