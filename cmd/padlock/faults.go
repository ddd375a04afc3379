package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/padlock-go/padlock/bench"
	"github.com/padlock-go/padlock/faults"
	"github.com/padlock-go/padlock/padlocktest"
)

// runFaults runs the fault suite (`padlock faults`), or one of its child
// processes (`padlock faults worker|resource`, which the suite starts).
func runFaults(ctx context.Context, args []string, out io.Writer) error {
	if len(args) > 0 && (args[0] == faults.RoleWorker || args[0] == faults.RoleResource) {
		return faults.Child(ctx, args[0], args[1:], os.Stdout)
	}
	fs := flag.NewFlagSet("faults", flag.ContinueOnError)
	backends := fs.String("backends", "all", "comma-separated backends: "+backendNames())
	scenarios := fs.String("scenarios", "all", "comma-separated scenario numbers or names")
	n := fs.Int("faults", 2, "faults injected per scenario and backend (at least)")
	duration := fs.Duration("duration", 0, "keep injecting faults for this long per scenario and backend")
	parallel := fs.Int("parallel", 1, "lanes of backends that run at once, each on servers of its own")
	dir := fs.String("out", "", "directory for each run's history (and results.json, unless --results says otherwise)")
	results := fs.String("results", "", "file for the run's results (default: DIR/results.json with --out; "+faultsResults+" with --all)")
	docs := fs.String("docs", "", "comma-separated Markdown files whose generated sections get the results ("+faultsDocs+")")
	all := fs.Bool("all", false, "every backend and scenario, with --results "+faultsResults+" and --docs "+faultsDocs)
	from := fs.String("from", "", "render an earlier run's results.json (the table, and --docs) instead of running")
	fs.SetOutput(os.Stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("faults takes no arguments, got %q", fs.Args())}
	}
	if *n < 1 || *duration < 0 || *parallel < 1 {
		return usageError{fmt.Errorf("%w: --faults and --parallel must be positive, --duration not negative", faults.ErrInvalid)}
	}
	if *from != "" {
		if *all || *dir != "" || *results != "" {
			return usageError{fmt.Errorf("--from renders an earlier run: it takes neither --all, --out nor --results")}
		}
		rep, err := readFaults(*from)
		if err != nil {
			return err
		}
		writeFaultsReport(out, rep.Results)
		return writeFaultDocs(out, rep, *docs)
	}
	if *all {
		*backends, *scenarios = "all", "all"
		if *docs == "" {
			*docs = faultsDocs
		}
		if *results == "" {
			*results = faultsResults
		}
	}
	if *results == "" && *dir != "" {
		*results = filepath.Join(*dir, "results.json")
	}
	o := faults.Options{Faults: *n, Duration: *duration, Parallel: *parallel, Progress: out, Out: *dir}
	if *backends == "all" {
		o.Backends = faults.Backends
	} else {
		for _, name := range strings.Split(*backends, ",") {
			b, err := faults.BackendNamed(strings.TrimSpace(name))
			if err != nil {
				return usageError{err}
			}
			o.Backends = append(o.Backends, b)
		}
	}
	var err error
	if o.Scenarios, err = faults.ScenariosByID(*scenarios); err != nil {
		return usageError{err}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// etcd is this command's own embedded server (padlock etcd), which
	// needs no Go toolchain or module.
	padlocktest.UseEtcdCommand(self, "etcd")
	o.Spawn = func(role string, args []string) *exec.Cmd {
		return exec.Command(self, append([]string{"faults", role}, args...)...)
	}
	begin, host := time.Now(), bench.ThisHost()
	res, runErr := faults.Run(ctx, o)
	fmt.Fprintf(out, "\n%d runs in %v\n\n", len(res), time.Since(begin).Round(time.Second))
	writeFaultsReport(out, res)
	rep := faults.NewReport(o, res, begin, host, commandLine("padlock faults", fs, args, []string{"out", "results", "docs", "from"}, nil))
	if *results != "" {
		if err := os.MkdirAll(filepath.Dir(*results), 0o755); err != nil {
			return err
		}
		if err := writeFile(*results, rep.WriteJSON); err != nil {
			return err
		}
		fmt.Fprintf(out, "\nwrote the results to %s\n", *results)
	}
	if runErr != nil {
		return runErr
	}
	if err := writeFaultDocs(out, rep, *docs); err != nil {
		return err
	}
	failed := 0
	for _, r := range res {
		if r.Verdict != "ok" && r.Verdict != "n/a" {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("faults: %d of %d runs went against their expected outcome", failed, len(res))
	}
	return nil
}

// Where padlock faults --all keeps its results, and the documents
// rendered from them (the tests check that these match).
const (
	faultsResults = "docs/faults/results.json"
	faultsDocs    = "docs/guarantees.md,docs/lost-lock.md"
)

// readFaults reads a results.json that padlock faults wrote.
func readFaults(path string) (*faults.Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rep, err := faults.ReadReport(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rep, nil
}

// writeFaultDocs renders the generated sections of each of the
// comma-separated documents from rep.
func writeFaultDocs(out io.Writer, rep *faults.Report, docs string) error {
	for _, doc := range splitList(docs) {
		if err := faults.UpdateDoc(doc, rep); err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote the results into %s\n", doc)
	}
	return nil
}

// writeFaultsReport prints the results' table and, under it, the legend of
// every code the table shows.
func writeFaultsReport(out io.Writer, results []faults.Result) {
	faults.WriteTable(out, results)
	fmt.Fprintln(out)
	faults.WriteLegend(out, results)
}

func backendNames() string {
	var names []string
	for _, b := range faults.Backends {
		names = append(names, b.Name)
	}
	return strings.Join(names, ", ")
}
