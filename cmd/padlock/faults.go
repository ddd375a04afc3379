package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/padlock-go/padlock/cmd/padlock/internal/faults"
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
	dir := fs.String("out", "", "directory for results.json and each run's history")
	docs := fs.String("docs", "", "Markdown file whose generated section gets the results (docs/guarantees.md)")
	all := fs.Bool("all", false, "every backend and scenario, and --docs docs/guarantees.md")
	fs.SetOutput(os.Stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("faults takes no arguments, got %q", fs.Args())}
	}
	if *n < 1 || *duration < 0 {
		return usageError{fmt.Errorf("%w: --faults must be positive, --duration not negative", faults.ErrInvalid)}
	}
	if *all {
		*backends, *scenarios = "all", "all"
		if *docs == "" {
			*docs = filepath.Join("docs", "guarantees.md")
		}
	}
	o := faults.Options{Faults: *n, Duration: *duration, Progress: out, Out: *dir}
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
	begin := time.Now()
	results, runErr := faults.Run(ctx, o)
	fmt.Fprintf(out, "\n%d runs in %v\n\n", len(results), time.Since(begin).Round(time.Second))
	writeFaultsReport(out, results)
	if *dir != "" {
		b, err := json.MarshalIndent(results, "", "  ")
		if err == nil {
			err = os.WriteFile(filepath.Join(*dir, "results.json"), b, 0o644)
		}
		if err != nil {
			return err
		}
	}
	if *docs != "" && runErr == nil {
		if err := faults.UpdateDoc(*docs, faults.Markdown(results, o.Scenarios)); err != nil {
			return err
		}
		fmt.Fprintf(out, "\nwrote the results into %s\n", *docs)
	}
	failed := 0
	for _, r := range results {
		if r.Verdict != "ok" && r.Verdict != "n/a" {
			failed++
		}
	}
	if runErr != nil {
		return runErr
	}
	if failed > 0 {
		return fmt.Errorf("faults: %d of %d runs went against their expected outcome", failed, len(results))
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
