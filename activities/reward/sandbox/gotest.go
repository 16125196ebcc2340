package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Go test mode runs the solution inside the harness's test process, so the process's exit status
// and its output are both within the solution's reach (init runs first). The verdict rests on
// three things instead:
//   - the solution may import only packages that cannot end the process, change its arguments
//     or flags, reach its memory or files, or embed files (goTestImports; no //go: directives):
//     it cannot stop the harness from running or hide what the testing package prints;
//   - every test, fuzz target and example the harness defines (parsed from its source) must
//     report "pass" in the test binary's event stream (-test.v=test2json, the framing that
//     `go test -json` is built from), none may fail or skip, and no other top-level test may
//     report: the counts match;
//   - a test with a random name, added in a file that sorts after the harness, must report
//     "pass": the run went through the whole test list. The solution, written before the name
//     was drawn, cannot forge its line.
// The exit status must be 0 as well, but never passes alone.

// goTestImports are the packages a go_test solution may import.
var goTestImports = map[string]bool{
	"bufio": true, "bytes": true, "cmp": true, "container/heap": true, "container/list": true,
	"container/ring": true, "context": true, "crypto/md5": true, "crypto/sha1": true,
	"crypto/sha256": true, "crypto/sha512": true, "encoding/base64": true, "encoding/binary": true,
	"encoding/csv": true, "encoding/hex": true, "encoding/json": true, "errors": true, "fmt": true,
	"hash": true, "hash/adler32": true, "hash/crc32": true, "hash/crc64": true, "hash/fnv": true,
	"hash/maphash": true, "io": true, "iter": true, "maps": true, "math": true, "math/big": true,
	"math/bits": true, "math/cmplx": true, "math/rand": true, "math/rand/v2": true, "regexp": true,
	"slices": true, "sort": true, "strconv": true, "strings": true, "sync": true, "sync/atomic": true,
	"text/scanner": true, "time": true, "unicode": true, "unicode/utf16": true, "unicode/utf8": true,
	"unique": true,
}

// goTestImportGate turns the import and directive check off, for tests that show the event
// checks hold on their own.
var goTestImportGate = true

var goDirective = regexp.MustCompile(`(?m)^\s*//go:([a-z_]+)`)

// goTestPlan is what a Go test run must show.
type goTestPlan struct {
	expected     []string // top-level tests, fuzz targets and examples of the harness, in order
	sentinel     string   // the test added last
	sentinelFile string
	sentinelSrc  []byte
}

// planGoTest checks the solution's imports and parses the harness. reject is the reason a
// solution fails without running; err is for a harness that defines nothing to run. A harness
// or solution that does not parse gives an empty plan: the build will fail and say why.
func planGoTest(solution, harness string) (plan goTestPlan, reject string, err error) {
	fset := token.NewFileSet()
	hf, herr := parser.ParseFile(fset, "solution_test.go", harness, parser.ParseComments)
	if herr == nil {
		plan.expected = harnessTests(hf)
		if len(plan.expected) == 0 {
			return plan, "", fmt.Errorf("sandbox: check go: go_test defines no Test, Fuzz or Example (with output) functions")
		}
	}
	if sf, err := parser.ParseFile(fset, "solution.go", solution, parser.ImportsOnly); err == nil && goTestImportGate {
		for _, imp := range sf.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !goTestImports[p] {
				allowed := make([]string, 0, len(goTestImports))
				for k := range goTestImports {
					allowed = append(allowed, k)
				}
				slices.Sort(allowed)
				return plan, fmt.Sprintf("solution imports %q: a go_test solution may import only %s", p, strings.Join(allowed, ", ")), nil
			}
		}
	}
	for _, m := range goDirective.FindAllStringSubmatch(solution, -1) {
		if m[1] != "build" && goTestImportGate {
			return plan, fmt.Sprintf("solution uses the //go:%s directive: not allowed in a go_test solution", m[1]), nil
		}
	}
	if herr != nil {
		return goTestPlan{}, "", nil
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return plan, "", fmt.Errorf("sandbox: check go: %w", err)
	}
	nonce := hex.EncodeToString(b)
	plan.sentinel = "TestZzTemper" + nonce
	plan.sentinelFile = "zz_temper_" + nonce[:8] + "_test.go"
	plan.sentinelSrc = []byte(fmt.Sprintf("package %s\n\nimport \"testing\"\n\nfunc %s(t *testing.T) {}\n", hf.Name.Name, plan.sentinel))
	return plan, "", nil
}

// harnessTests lists what `go test` runs from f: tests, fuzz targets (their seed corpus) and
// examples with an output comment.
func harnessTests(f *ast.File) []string {
	var out []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || fn.Type.Params == nil || len(fn.Type.Params.List) != 1 || len(fn.Type.Params.List[0].Names) > 1 {
			continue
		}
		star, ok := fn.Type.Params.List[0].Type.(*ast.StarExpr)
		if !ok {
			continue
		}
		sel, ok := star.X.(*ast.SelectorExpr)
		if !ok {
			continue
		}
		name := fn.Name.Name
		if (sel.Sel.Name == "T" && isTestName(name, "Test")) || (sel.Sel.Name == "F" && isTestName(name, "Fuzz")) {
			out = append(out, name)
		}
	}
	for _, ex := range doc.Examples(f) {
		if ex.Output != "" || ex.EmptyOutput {
			out = append(out, "Example"+ex.Name)
		}
	}
	return out
}

// isTestName is the go command's rule: prefix, then nothing or a rune that is not lower case.
func isTestName(name, prefix string) bool {
	if !strings.HasPrefix(name, prefix) {
		return false
	}
	if len(name) == len(prefix) {
		return true
	}
	r, _ := utf8.DecodeRuneInString(name[len(prefix):])
	return !unicode.IsLower(r)
}

// testEvent is one framing line of -test.v=test2json output, as `go test -json` would report it:
// Action is run, pass, fail or skip; Test is "" for the binary's final PASS or FAIL.
type testEvent struct {
	Action string
	Test   string
}

// testMarker starts the testing package's framing lines in test2json mode (a program's own
// output that starts with it is escaped by doubling, when written through testing).
const testMarker = "\x16"

func parseTestEvents(out []byte) []testEvent {
	var evs []testEvent
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimLeft(strings.TrimRight(line, "\r"), " \t")
		rest, ok := strings.CutPrefix(line, testMarker)
		if !ok || strings.HasPrefix(rest, testMarker) {
			continue
		}
		switch {
		case rest == "PASS" || rest == "FAIL":
			evs = append(evs, testEvent{Action: strings.ToLower(rest)})
		case strings.HasPrefix(rest, "=== RUN   "):
			evs = append(evs, testEvent{Action: "run", Test: strings.TrimSpace(rest[len("=== RUN   "):])})
		case strings.HasPrefix(rest, "--- "):
			status, tail, ok := strings.Cut(rest[4:], ": ")
			name, _, _ := strings.Cut(tail, " (")
			if ok && (status == "PASS" || status == "FAIL" || status == "SKIP") {
				evs = append(evs, testEvent{Action: strings.ToLower(status), Test: strings.TrimSpace(name)})
			}
		}
	}
	return evs
}

// judgeGoTest turns a run of the test binary into per-test results and the reason it failed
// ("" when it passed).
func judgeGoTest(plan goTestPlan, r Result) ([]CaseResult, string) {
	evs := parseTestEvents(r.Stdout)
	status := map[string]string{} // test → worst terminal action seen
	finalPass := false
	var unexpected []string
	for _, e := range evs {
		switch {
		case e.Test == "":
			finalPass = e.Action == "pass"
			continue
		case e.Action == "run" || strings.Contains(e.Test, "/"):
			continue
		}
		if e.Test != plan.sentinel && !slices.Contains(plan.expected, e.Test) && !slices.Contains(unexpected, e.Test) {
			unexpected = append(unexpected, e.Test)
		}
		if prev := status[e.Test]; prev == "" || prev == "pass" {
			status[e.Test] = e.Action
		}
	}
	cases := make([]CaseResult, len(plan.expected))
	firstBad := ""
	for i, name := range plan.expected {
		cr := &cases[i]
		switch status[name] {
		case "pass":
			cr.Passed = true
		case "":
			cr.Reason = "test " + name + " did not report"
		case "skip":
			cr.Reason = "test " + name + " skipped"
		default:
			cr.Reason = "test " + name + " failed"
		}
		if firstBad == "" && !cr.Passed {
			firstBad = cr.Reason
		}
	}
	reason := ""
	switch {
	case len(evs) == 0 && r.Failure() != "":
		reason = r.Failure() + "; no test events"
	case len(evs) == 0:
		reason = "no test events"
	case firstBad != "":
		reason = firstBad
		if f := r.Failure(); f != "" && !strings.HasPrefix(f, "exit status") {
			reason += " (" + f + ")"
		}
	case len(unexpected) > 0:
		reason = fmt.Sprintf("tests the harness does not define reported: %s (want %d tests)", strings.Join(unexpected, ", "), len(plan.expected))
	case status[plan.sentinel] != "pass":
		reason = "the test run did not complete"
	case !finalPass:
		reason = "the test binary did not report PASS"
	case r.Failure() != "":
		reason = r.Failure()
	}
	if reason != "" && firstBad == "" {
		// The run as a whole is not trustworthy: no test's pass counts.
		for i := range cases {
			cases[i] = CaseResult{Reason: reason}
		}
	}
	return cases, reason
}
