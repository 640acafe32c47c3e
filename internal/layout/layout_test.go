package layout

import (
	"go/ast"
	"go/parser"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStructFields: the count Check holds structs to.
func TestStructFields(t *testing.T) {
	tests := []struct {
		src  string
		want int
	}{
		{"struct{}", 0},
		{"struct{ a, b int; c string }", 3},
		{"struct{ sched; *counters; d int }", 3},
	}
	for _, tc := range tests {
		x, err := parser.ParseExpr(tc.src)
		if err != nil {
			t.Fatal(err)
		}
		if got := StructFields(x.(*ast.StructType)); got != tc.want {
			t.Errorf("%s: %d fields, want %d", tc.src, got, tc.want)
		}
	}
}

// recorder is a testing.TB that keeps the errors Check reports.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, format)
}

// TestCheck: a struct over the limit and a file over the limit are
// named, in a subfolder only when asked; test files and testdata are not
// read.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fields := func(n int) string {
		var b strings.Builder
		b.WriteString("package p\n\ntype big struct {\n")
		for i := range n {
			b.WriteString("\tf" + strings.Repeat("x", i+1) + " int\n")
		}
		return b.String() + "}\n"
	}
	write("ok.go", fields(MaxStructFields))
	write("ok_test.go", fields(MaxStructFields+1))
	write("testdata/big.go", fields(MaxStructFields+1))
	write("sub/big.go", fields(MaxStructFields+1))
	write("sub/long.go", "package p\n"+strings.Repeat("\n", MaxFileLines))
	for _, tc := range []struct {
		sub  bool
		want int
	}{{false, 0}, {true, 2}} {
		r := &recorder{TB: t}
		Check(r, dir, tc.sub, 1)
		if len(r.errs) != tc.want {
			t.Errorf("sub %v: %d errors %v, want %d", tc.sub, len(r.errs), r.errs, tc.want)
		}
	}
}
