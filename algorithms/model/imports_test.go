package model

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports enforces the algorithms layer rule for this package and algorithms/sample: GoMLX
// (and its compute backends), other algorithms packages and the standard library only, and no
// os/net outside tests.
func TestImports(t *testing.T) {
	for _, dir := range []string{".", "../sample"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
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
				first := strings.Split(p, "/")[0]
				std := !strings.Contains(first, ".")
				ok := (std && p != "os" && !strings.HasPrefix(p, "os/") && p != "net" && !strings.HasPrefix(p, "net/")) ||
					strings.HasPrefix(p, "github.com/gomlx/") ||
					strings.HasPrefix(p, "github.com/temperml/temper/algorithms/")
				if !ok {
					t.Errorf("%s imports %q: algorithms may use GoMLX and the standard library only", f, p)
				}
			}
		}
	}
}
