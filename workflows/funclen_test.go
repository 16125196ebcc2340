package workflows_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines bounds every function of the workflow code. A long workflow function grows closures
// and version branches that no one can review for replay safety; the long-running ones are run
// objects with one method per step instead (rlRun in rl.go, chunkedRun in chunked.go).
const maxFuncLines = 80

// longFuncs lists the functions of a Go source over limit lines (from func to the closing brace).
func longFuncs(name string, src any, limit int) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		return nil, err
	}
	var long []string
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > limit {
			long = append(long, fmt.Sprintf("%s: %s is %d lines", fset.Position(fd.Pos()), fd.Name.Name, n))
		}
	}
	return long, nil
}

// TestFunctionLength: no function in workflows/ (tests excepted) is over maxFuncLines lines.
func TestFunctionLength(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files here (%v)", err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		long, err := longFuncs(f, nil, maxFuncLines)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range long {
			t.Errorf("%s, over %d: split it", l, maxFuncLines)
		}
	}
}

// TestLongFuncs checks the measure: lines from func to the closing brace, doc comments excluded,
// methods and function literals counted in their function.
func TestLongFuncs(t *testing.T) {
	body := func(n int) string { return strings.Repeat("\tx++\n", n) }
	for _, c := range []struct {
		name, src string
		want      int
	}{
		{"at the limit", "func f() {\n" + body(8) + "}\n", 0},
		{"one over", "func f() {\n" + body(9) + "}\n", 1},
		{"doc comment not counted", "// f\n// does\n// x\nfunc f() {\n" + body(8) + "}\n", 0},
		{"method", "func (T) m() {\n" + body(9) + "}\n", 1},
		{"literal counted in its function", "func f() {\n\tg := func() {\n" + body(7) + "\t}\n\tg()\n}\n", 1},
		{"two functions", "func f() {\n" + body(9) + "}\nfunc g() {\n" + body(9) + "}\n", 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			long, err := longFuncs("x.go", "package x\nvar x int\ntype T int\n"+c.src, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(long) != c.want {
				t.Errorf("found %v, want %d long functions", long, c.want)
			}
		})
	}
}
