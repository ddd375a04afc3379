package padlocktest

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// Progress appends whole lines, each after its prefix, to the file
// PADLOCK_PROGRESS names, and discards them without one.
func TestProgress(t *testing.T) {
	path := filepath.Join(t.TempDir(), "progress")
	t.Setenv(ProgressEnv, path)
	a, b := Progress("a: "), Progress("b: ")
	fmt.Fprint(a, "etcd 1 holder-paused ...")
	fmt.Fprint(b, "one\n")
	fmt.Fprint(a, " ok (1.2s)\nnext")
	fmt.Fprint(a, "\n")
	got, err := os.ReadFile(path)
	if want := "b: one\na: etcd 1 holder-paused ... ok (1.2s)\na: next\n"; err != nil || string(got) != want {
		t.Errorf("progress file %q, %v; want %q", got, err, want)
	}
	t.Setenv(ProgressEnv, "")
	if Progress("c: ") != io.Discard {
		t.Error("without PADLOCK_PROGRESS, Progress does not discard")
	}
}
