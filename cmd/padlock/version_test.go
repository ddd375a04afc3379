package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

// version says which padlock it is from whatever the build recorded, and
// says plainly when nothing was recorded, instead of a bare "(devel)".
func TestVersionLine(t *testing.T) {
	main := debug.Module{Path: "github.com/padlock-go/padlock/cmd/padlock", Version: "(devel)"}
	lib := func(v string) []*debug.Module { return []*debug.Module{{Path: libraryPath, Version: v}} }
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}
	for _, c := range []struct {
		name    string
		bi      *debug.BuildInfo
		stamped string
		want    string
	}{
		{"go install @version", &debug.BuildInfo{Main: debug.Module{Path: main.Path, Version: "v1.2.3"}, Deps: lib("v1.2.3")}, "", "padlock v1.2.3 go"},
		{"VCS stamp", &debug.BuildInfo{Main: debug.Module{Path: main.Path, Version: "v0.0.0-20260102030405-0123456789ab+dirty"}, Settings: vcs}, "",
			"padlock v0.0.0-20260102030405-0123456789ab+dirty (0123456789ab, 2026-01-02T03:04:05Z, modified) go"},
		{"built inside another module", &debug.BuildInfo{Main: debug.Module{Path: "example.com/ops", Version: "(devel)"}, Deps: lib("v1.4.0")}, "", "padlock v1.4.0 go"},
		{"library replaced by a tagged fork", &debug.BuildInfo{Main: main, Deps: []*debug.Module{{Path: libraryPath, Version: "v1.4.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v1.4.1"}}}}, "", "padlock v1.4.1 go"},
		{"link-time stamp", &debug.BuildInfo{Main: main}, "v2.0.0", "padlock v2.0.0 go"},
		{"commit only", &debug.BuildInfo{Main: main, Deps: lib("(devel)"), Settings: vcs[:1]}, "", "padlock devel (0123456789ab) go"},
		{"workspace, -buildvcs=false", &debug.BuildInfo{Main: main, Deps: lib("(devel)")}, "", "padlock devel (no version recorded: built from source without VCS stamping"},
		{"replace to a directory", &debug.BuildInfo{Main: main, Deps: []*debug.Module{{Path: libraryPath, Version: "v0.0.0", Replace: &debug.Module{Path: "../.."}}}}, "", "padlock devel (no version recorded"},
		{"no build info", nil, "", "padlock devel (no version recorded"},
	} {
		got := versionLine(c.bi, c.stamped)
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: version = %q, want it to start %q", c.name, got, c.want)
		}
		if strings.Contains(got, "(devel)") {
			t.Errorf("%s: version = %q, a bare (devel)", c.name, got)
		}
	}
}
