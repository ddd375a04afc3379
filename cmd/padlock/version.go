package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
)

// version, if set at link time (go build -ldflags "-X main.version=v1.2.3"),
// is the version padlock reports, whatever the build recorded.
var version string

// libraryPath is the library's module: its version is padlock's when this
// command is built inside another module.
const libraryPath = "github.com/padlock-go/padlock"

// runVersion prints padlock's version (padlock version).
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
	bi, _ := debug.ReadBuildInfo()
	_, err := fmt.Fprintln(stdout, versionLine(bi, version))
	return err
}

// versionLine says which padlock bi is, best source first: the version
// stamped at link time; the module version the Go toolchain recorded (set
// by go install …@version, and from a VCS tag or commit when it stamps
// one); the library module's version when this command was built inside
// another module; the commit; and, when none is known, that and how to get
// one, instead of a bare "(devel)".
func versionLine(bi *debug.BuildInfo, stamped string) string {
	v := stamped
	var vcs []string
	if bi != nil {
		if v == "" && known(bi.Main.Version) {
			v = bi.Main.Version
		}
		if v == "" && bi.Main.Path != libraryPath {
			for _, d := range bi.Deps {
				if d.Path != libraryPath {
					continue
				}
				if d.Replace != nil {
					d = d.Replace
				}
				if known(d.Version) {
					v = d.Version
				}
			}
		}
		settings := map[string]string{}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		if r := settings["vcs.revision"]; r != "" {
			vcs = append(vcs, fmt.Sprintf("%.12s", r))
			if t := settings["vcs.time"]; t != "" {
				vcs = append(vcs, t)
			}
			if settings["vcs.modified"] == "true" {
				vcs = append(vcs, "modified")
			}
		}
	}
	var b strings.Builder
	b.WriteString("padlock ")
	switch {
	case v != "":
		b.WriteString(v)
	case len(vcs) > 0:
		b.WriteString("devel")
	default:
		b.WriteString(`devel (no version recorded: built from source without VCS stamping, e.g. -buildvcs=false; ` +
			`go install github.com/padlock-go/padlock/cmd/padlock@VERSION records one, or -ldflags "-X main.version=VERSION")`)
	}
	if len(vcs) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(vcs, ", "))
	}
	fmt.Fprintf(&b, " %s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return b.String()
}

// known reports whether a recorded module version says something: not
// empty, not "(devel)", and not the v0.0.0 a workspace or replace
// directive stands in with.
func known(v string) bool {
	return v != "" && v != "(devel)" && v != "v0.0.0" && !strings.HasPrefix(v, "v0.0.0-00010101000000-")
}
