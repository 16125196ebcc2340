package layoutrender

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports: the standard library (no os, net), golang.org/x/image for fonts and rasterising,
// and other algorithms packages (verify's parser) only.
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
			std := !strings.Contains(first, ".") && p != "os" && !strings.HasPrefix(p, "os/") && p != "net" && !strings.HasPrefix(p, "net/")
			if !std && !strings.HasPrefix(p, "golang.org/x/image/") && !strings.HasPrefix(p, "github.com/temperml/temper/algorithms/") {
				t.Errorf("%s imports %q: layoutrender may use the standard library, golang.org/x/image and algorithms only", f, p)
			}
		}
	}
}
