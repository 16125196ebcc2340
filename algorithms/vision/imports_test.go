package vision

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports enforces the algorithms layer rule: this package may use GoMLX (and its compute
// backends), other algorithms packages and the standard library, with no os or net outside tests;
// visioncfg, which workflows carry, the standard library alone.
func TestImports(t *testing.T) {
	for dir, gomlx := range map[string]bool{".": true, "visioncfg": false} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatalf("no Go files in %s", dir)
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
				ok := std || (gomlx && (strings.HasPrefix(p, "github.com/gomlx/") || strings.HasPrefix(p, "github.com/temperml/temper/algorithms/")))
				if !ok {
					t.Errorf("%s imports %q: not allowed here (vision: GoMLX, algorithms, standard library; visioncfg: standard library)", f, p)
				}
			}
		}
	}
}
