package padlock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// rootPath is the root package's import path.
const rootPath = "github.com/padlock-go/padlock"

// driverUses are the root package's names a driver may use: Register, to
// register its schemes, and NewLocker with the types of its signature, to
// build a Locker over a caller's client (etcd.New, redis.New). Errors,
// options and timing policy come from package backends.
var driverUses = []string{"Register", "NewLocker", "Locker", "OpenOption"}

// TestDriversTakeOnlyRegistrationFromRoot parses every driver's source and
// fails on any use of the root package beyond driverUses: a sentinel
// error, an option or a policy (SafetyMargin, MinTTL, DefaultTTL) spelled
// padlock.X instead of backends.X (issue 24). Test files are the drivers'
// users, and are not checked.
func TestDriversTakeOnlyRegistrationFromRoot(t *testing.T) {
	fset := token.NewFileSet()
	for _, dir := range []string{"etcd", "redis", "zookeeper", "mysqlpg", "memory"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s: %v", dir, err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, use := range rootUses(fset, f) {
				t.Errorf("%s", use)
			}
		}
	}
}

// rootUses returns, as "file:line: padlock.X", each selector on the root
// package's import name in f that driverUses does not allow.
func rootUses(fset *token.FileSet, f *ast.File) []string {
	name := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p != rootPath {
			continue
		}
		name = "padlock"
		if imp.Name != nil {
			name = imp.Name.Name
		}
	}
	switch name {
	case "":
		return nil
	case ".", "_":
		return []string{fset.Position(f.Package).String() + ": imports the root package as " + name}
	}
	var bad []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && x.Name == name && !slices.Contains(driverUses, sel.Sel.Name) {
			bad = append(bad, fset.Position(sel.Pos()).String()+": "+name+"."+sel.Sel.Name+" (use package backends)")
		}
		return true
	})
	return bad
}
