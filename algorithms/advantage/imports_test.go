package advantage

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports: advantages are host-side arithmetic, so this package uses the standard library only
// (and no os/net outside tests).
func TestImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			first := strings.Split(p, "/")[0]
			if strings.Contains(first, ".") || first == "os" || first == "net" {
				t.Errorf("%s imports %q: package advantage uses the standard library only", f, p)
			}
		}
	}
}
