// Package layout holds a package's source to the project's layout limits:
// no struct over MaxStructFields fields (state goes into owned parts of its
// own), no non-test file over MaxFileLines lines (files, and packages,
// split by job). The packages' TestLayout call Check.
package layout

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The layout limits.
const (
	MaxStructFields = 25
	MaxFileLines    = 800
)

// Check holds every non-test Go file in dir (and, with sub, in the
// folders below it but testdata) to the layout limits, naming each struct
// or file over them with its count. Fewer than minFiles files checked
// fails too: the test did not run in the package's folder.
func Check(t testing.TB, dir string, sub bool, minFiles int) {
	t.Helper()
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(dir, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name != dir && (!sub || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		if k := bytes.Count(src, []byte("\n")); k > MaxFileLines {
			t.Errorf("%s: %d lines, want at most %d", name, k, MaxFileLines)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			return err
		}
		checked++
		ast.Inspect(f, func(x ast.Node) bool {
			ts, ok := x.(*ast.TypeSpec)
			if !ok {
				return true
			}
			if st, ok := ts.Type.(*ast.StructType); ok {
				if k := StructFields(st); k > MaxStructFields {
					t.Errorf("%s: struct %s has %d fields, want at most %d", fset.Position(ts.Pos()), ts.Name.Name, k, MaxStructFields)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < minFiles {
		t.Fatalf("%d files checked in %s, want at least %d: not the package's folder?", checked, dir, minFiles)
	}
}

// StructFields counts st's fields, an embedded one as one.
func StructFields(st *ast.StructType) int {
	k := 0
	for _, f := range st.Fields.List {
		k += max(len(f.Names), 1)
	}
	return k
}
