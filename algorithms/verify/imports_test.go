package verify

import (
	goparser "go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports keeps the package pure: the standard library minus os, net, os/exec, syscall,
// unsafe and plugin, plus the JSON Schema library. internal/arch checks the layer as a whole;
// this is the stricter rule for verifiers, which judge untrusted text.
func TestImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	denied := []string{"os", "net", "syscall", "unsafe", "plugin", "runtime/cgo"}
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		n++
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := goparser.ParseFile(token.NewFileSet(), f, src, goparser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(p, "/")
			std := !strings.Contains(first, ".")
			ok := std || strings.HasPrefix(p, "github.com/santhosh-tekuri/jsonschema/")
			for _, d := range denied {
				if p == d || strings.HasPrefix(p, d+"/") {
					ok = false
				}
			}
			if !ok {
				t.Errorf("%s imports %q: verify may use the standard library (no os, net, exec, syscall) and the JSON Schema library only", f, p)
			}
		}
	}
	if n == 0 {
		t.Fatal("no source files found")
	}
}
