package arch

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/temperml/temper/"

// rule says what one layer may import. An import is checked against deny first, then allow.
type rule struct {
	layer string   // directory prefix ("algorithms/") or exact directory ("tpu")
	allow []string // prefixes of allowed imports; "std" = any standard library package
	deny  []string // prefixes that are never allowed, even if allowed above
	// contractsOnly: of the activities layer, only the roles' contract packages (activities/ROLE/ROLEapi:
	// activity names and I/O types, no GoMLX, no storage client) may be imported.
	contractsOnly bool
}

var rules = []rule{
	{layer: "algorithms", allow: []string{"std", module + "algorithms/", module + "internal/config", "github.com/gomlx/", "github.com/eliben/go-sentencepiece", "github.com/santhosh-tekuri/jsonschema/",
		"golang.org/x/text/", "google.golang.org/protobuf/",
		// fonts and the glyph rasteriser of algorithms/layoutrender (pure Go, no I/O)
		"golang.org/x/image/font", "golang.org/x/image/math/fixed"},
		deny: []string{"os", "net", "syscall", "plugin", "go.temporal.io/", "cloud.google.com/"}},
	{layer: "tpu", allow: []string{"std", module + "algorithms/", module + "internal/config", module + "tpu/", "github.com/gomlx/"},
		deny: []string{"go.temporal.io/", "cloud.google.com/", "net"}},
	{layer: "activities", allow: []string{"std", module + "algorithms/", module + "internal/", module + "activities/",
		"go.temporal.io/sdk/activity", "go.temporal.io/sdk/temporal", "go.temporal.io/sdk/log", "go.temporal.io/api/",
		"cloud.google.com/go/storage", "google.golang.org/api/", "google.golang.org/grpc", "github.com/gomlx/", "github.com/googleapis/",
		// the code sandbox's isolation: system calls, the seccomp filter and its BPF program
		"golang.org/x/sys/unix", "github.com/elastic/go-seccomp-bpf", "golang.org/x/net/bpf"},
		deny: []string{module + "tpu", module + "workflows", module + "workers", module + "cmd", module + "internal/bench", module + "internal/report",
			"go.temporal.io/sdk/workflow", "go.temporal.io/sdk/client", "go.temporal.io/sdk/worker"}},
	{layer: "workflows", allow: []string{"std", module + "activities/", module + "algorithms/", module + "internal/config", module + "workflows/",
		"go.temporal.io/sdk/workflow", "go.temporal.io/sdk/temporal", "go.temporal.io/sdk/log", "go.temporal.io/api/"},
		deny:          []string{"os", "net", "math/rand", "crypto/rand", "sync", "syscall", "io/ioutil", "time/tzdata", module + "tpu", "github.com/gomlx/", "cloud.google.com/"},
		contractsOnly: true},
	// internal/bench and internal/report are the binary's benchmarks and its views of runs: like cmd they
	// may import every layer below it, and no layer below cmd may import them.
	{layer: "internal/bench", allow: []string{""}, deny: []string{module + "cmd"}},
	{layer: "internal/report", allow: []string{""}, deny: []string{module + "cmd"}},
	// internal/datagen writes datasets for `temper data`, sampling a checkpoint in-process as a worker would.
	{layer: "internal/datagen", allow: []string{""}, deny: []string{module + "cmd"}},
	// internal/pipeline reads, checks, forks, starts and steers pipelines: the workflows' input types and a client.
	{layer: "internal/pipeline", allow: []string{"std", module + "algorithms/", module + "activities/", module + "internal/", module + "workflows",
		"go.temporal.io/sdk/client", "go.temporal.io/sdk/temporal"},
		deny: []string{module + "cmd", module + "workers", module + "tpu"}},
	// internal/modeldir reads and writes model directories for `temper model`: algorithms, and tpu's
	// directory writer; no Temporal.
	{layer: "internal/modeldir", allow: []string{"std", module + "algorithms/", module + "internal/usage", module + "tpu"},
		deny: []string{module + "workflows", module + "workers", module + "cmd", "go.temporal.io/", "net"}},
	// internal/serve is the OpenAI-compatible server: HTTP over algorithms, the engine an interface
	// (tpu is wired in by cmd), so that a rollout worker may serve its policy through it.
	{layer: "internal/serve", allow: []string{"std", module + "algorithms/", module + "internal/", module + "activities/ckpt", "github.com/prometheus/client_golang/"},
		deny: []string{module + "tpu", module + "workflows", module + "workers", module + "cmd", "go.temporal.io/"}},
	{layer: "internal", allow: []string{"std", module + "internal/", "gopkg.in/yaml.v3"}, deny: []string{"net", "go.temporal.io/", module + "internal/bench", module + "internal/report", module + "internal/modeldir", module + "internal/datagen", module + "internal/pipeline"}},
	// scripts/design generates synthetic design data with the renderer: algorithms, nothing above.
	{layer: "scripts/design", allow: []string{"std", module + "algorithms/", module + "scripts/design"}},
	// scripts/peer runs the PyTorch peer of the benchmarks: a subprocess, never a library of the layers.
	{layer: "scripts", allow: []string{"std"}},
	{layer: "workers", allow: []string{""}},
	{layer: "cmd", allow: []string{""}},
}

// narrower are stricter rules for single packages, checked before their layer's (which applies too):
// pure leaves that workflows or untrusted input reach. A rule names one directory, not its subtree.
var narrower = []rule{
	// advantages are host-side arithmetic.
	{layer: "algorithms/advantage", allow: []string{"std"}, deny: []string{"os", "net"}},
	// order statistics shared by benchmarks: plain arithmetic.
	{layer: "algorithms/stats", allow: []string{"std"}, deny: []string{"os", "net"}},
	// bytes come in (fetching them is an activity's job), so workflows and every role may import it.
	{layer: "algorithms/imageproc", allow: []string{"std"}, deny: []string{"os", "net", "syscall", "unsafe", "plugin"}},
	// verifiers judge untrusted text.
	{layer: "algorithms/verify", allow: []string{"std", "github.com/santhosh-tekuri/jsonschema/"},
		deny: []string{"os", "net", "syscall", "unsafe", "plugin", "runtime/cgo"}},
	{layer: "algorithms/layoutrender", allow: []string{"std", "golang.org/x/image/", module + "algorithms/"}, deny: []string{"os", "net"}},
	{layer: "algorithms/model", allow: []string{"std", "github.com/gomlx/", module + "algorithms/"}, deny: []string{"os", "net"}},
	{layer: "algorithms/sample", allow: []string{"std", "github.com/gomlx/", module + "algorithms/"}, deny: []string{"os", "net"}},
	{layer: "algorithms/vision", allow: []string{"std", "github.com/gomlx/", module + "algorithms/"}, deny: []string{"os", "net"}},
	// workflows carry the vision config.
	{layer: "algorithms/vision/visioncfg", allow: []string{"std"}, deny: []string{"os", "net"}},
}

// isContract reports whether path is a role's contract package: activities/ROLE/ROLEapi (its
// activity names and I/O types, named after the role so that no importer needs an alias).
func isContract(path string) bool {
	role, rest, ok := strings.Cut(strings.TrimPrefix(path, module+"activities/"), "/")
	return ok && strings.HasPrefix(path, module+"activities/") && rest == role+"api"
}

func hasPrefixPath(path, prefix string) bool {
	if prefix == "" {
		return true
	}
	if strings.HasSuffix(prefix, "/") {
		return strings.HasPrefix(path, prefix)
	}
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// violation returns why dir may not import path, or "".
func violation(dir, path string) string {
	for _, r := range narrower {
		if dir == r.layer {
			if v := r.check(dir, path); v != "" {
				return v
			}
		}
	}
	for _, r := range rules {
		if hasPrefixPath(dir, r.layer) {
			return r.check(dir, path)
		}
	}
	return fmt.Sprintf("%s is in no layer of DESIGN.md; add a rule for it to internal/arch", dir)
}

// check returns why r forbids dir to import path, or "".
func (r rule) check(dir, path string) string {
	for _, d := range r.deny {
		if hasPrefixPath(path, d) {
			return fmt.Sprintf("%s must not import %s (denied: %s)", dir, path, d)
		}
	}
	if r.contractsOnly && hasPrefixPath(path, module+"activities/") && !isContract(path) {
		role, _, _ := strings.Cut(strings.TrimPrefix(path, module+"activities/"), "/")
		return fmt.Sprintf("%s must not import %s: import the role's contract package (activities/%s/%sapi) instead", dir, path, role, role)
	}
	for _, a := range r.allow {
		if (a == "std" && isStd(path)) || (a != "std" && hasPrefixPath(path, a)) {
			return ""
		}
	}
	return fmt.Sprintf("%s must not import %s (layer %s allows: %s)", dir, path, r.layer, strings.Join(r.allow, ", "))
}

type goFile struct {
	dir  string // relative to the repo root, slash-separated
	path string
	ast  *ast.File
	fset *token.FileSet
}

func repoFiles(t *testing.T) []goFile {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var files []goFile
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin" || name == "vendor") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); p != root && err == nil {
				return filepath.SkipDir // a nested module (third_party/compute) is not part of this one
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		if strings.Contains(p, "/internal/arch/") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		files = append(files, goFile{dir: filepath.ToSlash(rel), path: p, ast: f, fset: fset})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestImportsGoDownTheLayers(t *testing.T) {
	files := repoFiles(t)
	layersSeen := map[string]bool{}
	for _, f := range files {
		first, _, _ := strings.Cut(f.dir, "/")
		layersSeen[first] = true
		for _, imp := range f.ast.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if v := violation(f.dir, path); v != "" {
				t.Errorf("%s: %s", f.fset.Position(imp.Pos()), v)
			}
		}
	}
	// A test that saw nothing proves nothing.
	for _, l := range []string{"cmd", "workers", "workflows", "activities", "internal"} {
		if !layersSeen[l] {
			t.Errorf("no Go files found in layer %s: is the walk broken?", l)
		}
	}
}

// TestWorkflowCodeIsReplaySafe rejects goroutines, native select and wall-clock time in workflows/.
func TestWorkflowCodeIsReplaySafe(t *testing.T) {
	n := 0
	for _, f := range repoFiles(t) {
		if !hasPrefixPath(f.dir, "workflows") {
			continue
		}
		full, err := parser.ParseFile(f.fset, f.path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		n++
		for _, p := range replayHazards(full, f.fset) {
			t.Error(p)
		}
	}
	if n == 0 {
		t.Fatal("no workflow files found")
	}
}

func replayHazards(f *ast.File, fset *token.FileSet) []string {
	var out []string
	banned := map[string]bool{"Now": true, "Sleep": true, "Since": true, "Until": true, "After": true, "AfterFunc": true, "NewTimer": true, "NewTicker": true, "Tick": true}
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.GoStmt:
			out = append(out, fmt.Sprintf("%s: go statement in workflow code (use workflow.Go)", fset.Position(x.Pos())))
		case *ast.SelectStmt:
			out = append(out, fmt.Sprintf("%s: select in workflow code (use workflow.NewSelector)", fset.Position(x.Pos())))
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok && id.Name == "time" && banned[x.Sel.Name] {
				out = append(out, fmt.Sprintf("%s: time.%s in workflow code (use workflow.Now / workflow.Sleep)", fset.Position(x.Pos()), x.Sel.Name))
			}
		}
		return true
	})
	return out
}

// TestRulesCatchViolations keeps the checks honest: known violations must be reported.
func TestRulesCatchViolations(t *testing.T) {
	bad := [][2]string{
		{"algorithms/model", "go.temporal.io/sdk/workflow"},
		{"algorithms/model", "os"},
		{"algorithms/model", "net/http"},
		{"algorithms/model", module + "tpu"},
		{"tpu", "go.temporal.io/sdk/client"},
		{"activities/train", module + "workflows"},
		{"activities/train", module + "tpu"},
		{"activities/train", "go.temporal.io/sdk/workflow"},
		{"workflows", module + "tpu"},
		{"workflows", "os"},
		{"workflows", "math/rand"},
		{"workflows", "cloud.google.com/go/storage"},
		{"workflows", "github.com/gomlx/gomlx/core/graph"},
		{"workflows", module + "activities/train"},
		{"workflows", module + "activities/rollout"},
		{"workflows", module + "activities/demo"},
		{"workflows", module + "activities/train/lm"},
		{"workflows", module + "activities/rollout/trainapi"},
		{"newlayer", "fmt"},
		{"algorithms/imageproc", "github.com/gomlx/gomlx/core/graph"},
		{"algorithms/imageproc", "unsafe"},
		{"algorithms/advantage", "github.com/gomlx/gomlx/core/graph"},
		{"algorithms/verify", "runtime/cgo"},
		{"algorithms/vision/visioncfg", module + "algorithms/model"},
		{"algorithms/layoutrender", "github.com/gomlx/gomlx/core/graph"},
		{"algorithms/sample", "os/exec"},
		{"internal/config", module + "internal/report"},
		{"activities/train", module + "internal/bench"},
		{"internal/report", module + "cmd/temper"},
		{"internal/serve", module + "tpu"},
		{"internal/modeldir", module + "workers"},
		{"internal/usage", module + "internal/modeldir"},
		{"internal/pipeline", module + "workers"},
		{"internal/serve", "go.temporal.io/sdk/client"},
		{"internal/config", "net/http"},
	}
	for _, b := range bad {
		if violation(b[0], b[1]) == "" {
			t.Errorf("%s importing %s should be a violation", b[0], b[1])
		}
	}
	good := [][2]string{
		{"algorithms/model", "github.com/gomlx/gomlx/core/graph"},
		{"algorithms/model", "math"},
		{"algorithms/verify", "github.com/santhosh-tekuri/jsonschema/v6"},
		{"algorithms/vision", "github.com/gomlx/gomlx/core/graph"},
		{"algorithms/layoutrender", "golang.org/x/image/font"},
		{"tpu", module + "algorithms/model"},
		{"activities/train", "go.temporal.io/sdk/activity"},
		{"activities/ckpt", "cloud.google.com/go/storage"},
		{"workflows", "go.temporal.io/sdk/workflow"},
		{"workflows", module + "activities/demo/demoapi"},
		{"workflows", module + "activities/train/trainapi"},
		{"workflows", module + "activities/tools/toolsapi"},
		{"workers", "go.temporal.io/server/temporal"},
		{"internal/bench", module + "workers"},
		{"internal/report", "go.temporal.io/sdk/client"},
		{"internal/serve", "net/http"},
		{"internal/serve", module + "algorithms/chat"},
		{"internal/modeldir", module + "tpu"},
		{"internal/modeldir", module + "internal/usage"},
		{"internal/pipeline", module + "workflows"},
	}
	for _, g := range good {
		if v := violation(g[0], g[1]); v != "" {
			t.Errorf("unexpected violation: %s", v)
		}
	}
	src := "package w\nimport \"time\"\nfunc f() { go f(); _ = time.Now(); select {} }\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "w.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := replayHazards(f, fset); len(got) != 3 {
		t.Errorf("want 3 hazards, got %v", got)
	}
}

// TestNoAliasForTemperPackages: every Temper package is imported under its own name (tests too), so a
// package reads the same wherever it is used; a clash means one of the two packages needs a better
// name. A blank import (_) is allowed.
func TestNoAliasForTemperPackages(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "third_party" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		seen++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if imp.Name != nil && imp.Name.Name != "_" && hasPrefixPath(path, module) {
				t.Errorf("%s imports %s as %s: import it under its own name (rename a package that clashes)", fset.Position(imp.Pos()), path, imp.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 100 {
		t.Fatalf("read %d Go files: is the walk broken?", seen)
	}
}
