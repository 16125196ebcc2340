package imageproc

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports keeps the package at the bottom layer: the standard library only, without os, net
// or exec (bytes come in; fetching them is an activity's job), so that workflows and every role
// may import it.
func TestImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(p, "/")
			denied := false
			for _, d := range []string{"os", "net", "syscall", "unsafe", "plugin"} {
				if p == d || strings.HasPrefix(p, d+"/") {
					denied = true
				}
			}
			if strings.Contains(first, ".") || denied {
				t.Errorf("%s imports %q: imageproc may use the standard library only (no os, net, exec)", f, p)
			}
		}
	}
}
