package cli

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestCommandsListed: every command Run knows (the cases of its switch)
// is in the usage, in the package doc with its file, and answers -h
// without "unknown command".
func TestCommandsListed(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "cli.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		if fn, ok := n.(*ast.FuncDecl); ok && fn.Name.Name != "Run" {
			return false
		}
		if cc, ok := n.(*ast.CaseClause); ok {
			for _, e := range cc.List {
				if lit, ok := e.(*ast.BasicLit); ok {
					s, _ := strconv.Unquote(lit.Value)
					names = append(names, s)
				}
			}
		}
		return true
	})
	if len(names) < 14 || !slices.Contains(names, "plan") || !slices.Contains(names, "cdxj") {
		t.Fatalf("commands found in Run: %v", names)
	}
	doc := f.Doc.Text()
	for _, name := range names {
		if strings.HasPrefix(name, "-") || name == "help" {
			continue
		}
		if !strings.Contains(usage, "phasecrawl "+name) {
			t.Errorf("usage does not list %s", name)
		}
		file := name + ".go"
		if name == "resume" {
			file = "pause.go"
		}
		if !strings.Contains(doc, name) || !strings.Contains(doc, "("+file+")") {
			t.Errorf("the package doc does not list %s (%s)", name, file)
		}
		var out, errOut bytes.Buffer
		Run([]string{name, "-h"}, nil, &out, &errOut)
		if strings.Contains(errOut.String(), "unknown command") {
			t.Errorf("%s -h: %s", name, errOut.String())
		}
	}
}
