package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
)

// runVersion prints the module version and VCS revision the binary was
// built from, as the Go toolchain recorded them (padlock version).
func runVersion(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: padlock version\n\nPrints padlock's version, the commit it was built from if recorded, and the Go it was built with.")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("version takes no arguments, got %q", fs.Args())}
	}
	version, rev, goVersion := "(devel)", "", runtime.Version()
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				rev = s.Value
			}
		}
	}
	fmt.Fprintf(stdout, "padlock %s", version)
	if rev != "" {
		fmt.Fprintf(stdout, " (%.12s)", rev)
	}
	_, err := fmt.Fprintf(stdout, " %s\n", goVersion)
	return err
}
