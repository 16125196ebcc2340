package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/temperml/temper/workflows"
)

// The docs tests keep README.md and docs/ honest without building the binary or starting a server:
// every `temper COMMAND [SUBCOMMAND] --flag`, `make TARGET`, test name and repository path they name
// must exist, the README stays a front door (at most readmeMaxLines), and docs/configuration.md is
// exactly what `temper config explain` prints today.

const (
	docsRoot       = "../.."
	readmeMaxLines = 200
	configDoc      = "docs/configuration.md"
	// updateDocsEnv makes TestConfigurationDocIsCurrent rewrite configDoc instead of comparing.
	updateDocsEnv = "TEMPER_UPDATE_DOCS"
)

var regenerateConfigDoc = "GOEXPERIMENT=simd " + updateDocsEnv + "=1 go test -count=1 -run TestConfigurationDocIsCurrent ./cmd/temper/"

// docFiles lists README.md and every Markdown file under docs/, relative to the repository root.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(docsRoot, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(docsRoot, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestReadmeIsShort(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(docsRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte("\n")); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, want at most %d: move detail into docs/ and link it", n, readmeMaxLines)
	}
}

// TestDocsNameRealThings checks every command, flag, make target, test and path README.md and docs/
// name against the code and the tree.
func TestDocsNameRealThings(t *testing.T) {
	c := newDocChecker(t, docsRoot)
	for _, f := range docFiles(t) {
		data, err := os.ReadFile(filepath.Join(docsRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range c.check(f, string(data)) {
			t.Error(p)
		}
	}
}

// TestDocCheckerCatchesMadeUpNames feeds the checker made-up names: each must be reported, and the
// real ones beside them must not.
func TestDocCheckerCatchesMadeUpNames(t *testing.T) {
	c := newDocChecker(t, docsRoot)
	for _, tc := range []struct {
		name, doc string
		want      []string // substrings of the problems, one per problem, in order
	}{
		{"real names pass", "Run `temper run p.yaml --wait --json`, `bin/temper ckpt verify URI`, `temper config explain grpo`,\n" +
			"`make test-long`, `CI=true make test`, `TestReadmeIsShort`, `algorithms/model/testdata/families/<family>-<old|new>/`, `scripts/cluster.sh`, `activities/*/*api`, `./workflows/`,\n" +
			"[the design](docs/architecture.md) and `cd third_party/compute && go test ./internal/gobackend/`.\n" +
			"```sh\ntemper worker --roles trainer \\\n  --temporal HOST:PORT   # a comment with --no-such-flag\n```\n" +
			"```\ncmd/temper          one binary: demo | dev\n```\n" +
			"```text\ninject_nan_at   int   0   testing: make iteration N's update non-finite\n```\n", nil},
		{"make target after a separator", "`cd /tmp && make frob`", []string{`make frob`}},
		{"make target after an environment", "`CI=true make tests`", []string{`make tests`}},
		{"made-up command through go run", "`go run ./cmd/temper frob`", []string{`"frob" is not a temper command`}},
		{"made-up command", "`temper frobnicate RUN`", []string{`"frobnicate" is not a temper command`}},
		{"made-up subcommand", "`temper ckpt shred URI`", []string{`"shred" is not a subcommand of temper ckpt`}},
		{"made-up flag", "`temper run p.yaml --wait --fast`", []string{`temper run has no flag --fast`}},
		{"flag on a continued line", "```sh\ntemper worker --roles all \\\n  --turbo\n```\n", []string{`temper worker has no flag --turbo`}},
		{"made-up make target", "`make test-everything`", []string{`make test-everything`}},
		{"made-up test", "`TestThatDoesNotExist`", []string{`TestThatDoesNotExist`}},
		{"made-up test in -run", "`go test -run 'TestReadmeIsShort|TestNope' ./cmd/temper/`", []string{`TestNope`}},
		{"made-up path", "see `scripts/no-such-script.sh`", []string{`scripts/no-such-script.sh`}},
		{"made-up glob", "`scripts/demo-trials/*.toml`", []string{`scripts/demo-trials/*.toml`}},
		{"placeholder matching nothing", "`algorithms/model/testdata/<nothing>.toml`", []string{`no such path`}},
		{"made-up link", "[notes](docs/lab-notes/nothing.md)", []string{`docs/lab-notes/nothing.md`}},
		{"made-up anchor", "[x](docs/benchmarks.md#the-demo) and\n[y](docs/benchmarks.md#no-such-heading)", []string{`no heading with that anchor`}},
		{"span across lines", "the `temper samples RUN\nPHASE --itr 3` command", []string{`temper samples has no flag --itr`}},
		{"inline backticks at a line's start are no fence", "```` ```tool_code ```` blocks\n\nthen `go test -run TestReadmeIsShort ./cmd/temper` and `scripts/nothing.sh`", []string{`scripts/nothing.sh`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := c.check("test.md", tc.doc)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d problems, want %d: %q", len(got), len(tc.want), got)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to mention %q", i, got[i], w)
				}
			}
		})
	}
}

// TestConfigurationDocIsCurrent regenerates docs/configuration.md from `temper config explain` in
// process and fails when the committed file differs.
func TestConfigurationDocIsCurrent(t *testing.T) {
	want, err := configurationDoc()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(docsRoot, configDoc)
	if os.Getenv(updateDocsEnv) == "1" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; generate it: %s", err, regenerateConfigDoc)
	}
	if string(got) != want {
		t.Errorf("%s is stale (%s); regenerate it: %s", configDoc, docFirstDiff(string(got), want), regenerateConfigDoc)
	}
}

func docFirstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d is %q, `temper config explain` now gives %q", i+1, gl, wl)
		}
	}
	return "same lines"
}

// configurationDoc is docs/configuration.md: the output of `temper config explain`, `temper config
// explain pipeline` and `temper config explain KIND` for every registered kind.
func configurationDoc() (string, error) {
	var b strings.Builder
	b.WriteString("# Configuration reference\n\n")
	fmt.Fprintf(&b, "<!-- Generated from `temper config explain`; do not edit. Regenerate: %s -->\n\n", regenerateConfigDoc)
	b.WriteString("Every field of a pipeline file and of each phase kind's `config`, with its type, default and help, as\n" +
		"`temper config explain` prints them (a test regenerates this page and fails when it is stale). How pipelines,\n" +
		"phases and data fit together is in [pipelines.md](pipelines.md). A `--set a.b=v` override of `temper run`\n" +
		"takes the same dotted paths (`phases.NAME.config.FIELD`). An unknown field is an error that names it and\n" +
		"suggests the closest valid one.\n\n")
	explain := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		if err := runCLI(context.Background(), append([]string{"config", "explain"}, args...), &out, &errOut); err != nil {
			return "", fmt.Errorf("temper config explain %s: %w (%s)", strings.Join(args, " "), err, errOut.String())
		}
		return out.String(), nil
	}
	section := func(title string, args ...string) error {
		s, err := explain(args...)
		if err != nil {
			return err
		}
		cmd := strings.TrimSpace("temper config explain " + strings.Join(args, " "))
		fmt.Fprintf(&b, "## %s\n\n`%s`:\n\n```text\n%s```\n\n", title, cmd, s)
		return nil
	}
	if err := section("Phase kinds"); err != nil {
		return "", err
	}
	if err := section("pipeline", "pipeline"); err != nil {
		return "", err
	}
	for _, k := range workflows.PhaseKinds() {
		if err := section(k.Kind, k.Kind); err != nil {
			return "", err
		}
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// docChecker knows what exists: commands and their subcommands and flags, make targets, test
// functions and the repository's top-level entries.
type docChecker struct {
	root        string
	subcommands map[string]map[string]bool // command → subcommand names (none: takes no subcommand)
	flags       map[string]*flag.FlagSet
	makeTargets map[string]bool
	tests       map[string]bool
	topLevel    map[string]bool // entries at the repository root that a doc path may start with
}

func newDocChecker(t *testing.T, root string) *docChecker {
	t.Helper()
	c := &docChecker{root: root, subcommands: map[string]map[string]bool{}, flags: map[string]*flag.FlagSet{},
		makeTargets: map[string]bool{}, tests: map[string]bool{}, topLevel: map[string]bool{}}
	for _, name := range commandNames() {
		cmd := commands[name]
		c.subcommands[name] = docSubcommands(cmd.usage)
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		cmd.flags(fs)
		c.flags[name] = fs
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`).FindAllStringSubmatch(string(mk), -1) {
		c.makeTargets[m[1]] = true
	}
	testFunc := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)\w*)\(`)
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, "_test.go") {
			src, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range testFunc.FindAllStringSubmatch(string(src), -1) {
				c.tests[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		// bin/ holds what `make build` wrote, not the repository's content.
		if e.Name() != ".git" && e.Name() != "bin" {
			c.topLevel[e.Name()] = true
		}
	}
	return c
}

// docSubcommands reads a command's subcommands from its usage line, where each alternative starts with
// its subcommand: "ls [URI] | verify URI | export URI DIR" → ls, verify, export. Placeholders are
// upper case ("RUN [RUN...]") or flags ("--reward SPEC FILE"), so they name none.
func docSubcommands(usage string) map[string]bool {
	subs := map[string]bool{}
	depth, start := 0, 0
	alts := []string{}
	for i, r := range usage {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		case '|':
			if depth == 0 {
				alts = append(alts, usage[start:i])
				start = i + 1
			}
		}
	}
	alts = append(alts, usage[start:])
	for _, a := range alts {
		f := strings.Fields(a)
		if len(f) > 0 && docSubcommandWord.MatchString(f[0]) {
			subs[f[0]] = true
		}
	}
	return subs
}

var (
	docSubcommandWord = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	// docTemperWord finds the binary in a command line: `temper`, `bin/temper`, `bin/temper-xla`, `go run
	// ./cmd/temper`; not the package path cmd/temper.
	docTemperWord  = regexp.MustCompile(`^(?:(?:\./)?bin/|\./cmd/)?temper(?:-xla)?$`)
	docLinkRe      = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	docSpanRe      = regexp.MustCompile("`([^`]+)`")
	docPlaceholder = regexp.MustCompile(`<[^<>/]*>`)
	docEnvAssign   = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)
	docTestNameRe  = regexp.MustCompile(`^(?:Test|Fuzz)[A-Z0-9_]\w*$`)
)

// docSpan is a piece of code a doc names: an inline code span or one logical line of a fenced block.
type docSpan struct {
	line int
	text string
}

// check returns one problem per made-up name in doc (file names it in the messages).
func (c *docChecker) check(file, doc string) []string {
	var problems []string
	report := func(line int, format string, a ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: %s", file, line, fmt.Sprintf(format, a...)))
	}
	spans, prose := splitDoc(doc)
	for _, p := range prose {
		for _, ix := range docLinkRe.FindAllStringSubmatchIndex(p.text, -1) {
			target, line := p.text[ix[2]:ix[3]], p.line+strings.Count(p.text[:ix[0]], "\n")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, frag, _ := strings.Cut(target, "#")
			rel := filepath.Join(filepath.Dir(file), target)
			if _, err := os.Stat(filepath.Join(c.root, rel)); err != nil {
				report(line, "link to %s: no such file in the repository", p.text[ix[2]:ix[3]])
				continue
			}
			if frag != "" && strings.HasSuffix(rel, ".md") && !c.hasAnchor(rel, frag) {
				report(line, "link to %s: %s has no heading with that anchor", p.text[ix[2]:ix[3]], rel)
			}
		}
	}
	for _, s := range spans {
		for _, msg := range c.checkSpan(s.text) {
			report(s.line, "%s", msg)
		}
	}
	return problems
}

// hasAnchor reports whether the Markdown file rel (relative to the root) has a heading whose
// GitHub anchor is frag: lower case, punctuation dropped, spaces as hyphens, -1, -2… for repeats.
func (c *docChecker) hasAnchor(rel, frag string) bool {
	data, err := os.ReadFile(filepath.Join(c.root, rel))
	if err != nil {
		return false
	}
	seen := map[string]int{}
	inFence := false
	for _, l := range strings.Split(string(data), "\n") {
		if docFence(l) {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(l, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(strings.TrimLeft(l, "#"))) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		if a == frag {
			return true
		}
	}
	return false
}

// splitDoc returns the doc's code (inline spans, fenced lines with their continuations joined) and its
// prose paragraphs (for links), each with the line it starts on.
func splitDoc(doc string) (spans, prose []docSpan) {
	lines := strings.Split(doc, "\n")
	var para []string
	paraLine := 0
	flush := func() {
		if len(para) == 0 {
			return
		}
		text := strings.Join(para, "\n")
		prose = append(prose, docSpan{paraLine, text})
		for _, m := range docSpanRe.FindAllStringSubmatchIndex(text, -1) {
			spans = append(spans, docSpan{paraLine + strings.Count(text[:m[0]], "\n"), strings.ReplaceAll(text[m[2]:m[3]], "\n", " ")})
		}
		para = nil
	}
	inFence := false
	var cont string
	contLine := 0
	for i, l := range lines {
		n := i + 1
		if docFence(l) {
			flush()
			inFence = !inFence
			continue
		}
		if inFence {
			if cont == "" {
				contLine = n
			}
			if strings.HasSuffix(l, "\\") {
				cont += strings.TrimSuffix(l, "\\") + " "
				continue
			}
			spans = append(spans, docSpan{contLine, cont + l})
			cont = ""
			continue
		}
		if strings.TrimSpace(l) == "" {
			flush()
			continue
		}
		if len(para) == 0 {
			paraLine = n
		}
		para = append(para, l)
	}
	flush()
	return spans, prose
}

// docFence reports whether l opens or closes a fenced code block: three or more backticks and an
// info string without backticks (CommonMark), so a line that starts with an inline span of
// backticks (```` ```tool_code ```` …) is prose.
func docFence(l string) bool {
	t := strings.TrimSpace(l)
	rest := strings.TrimLeft(t, "`")
	return len(t)-len(rest) >= 3 && !strings.Contains(rest, "`")
}

// checkSpan checks the commands, make targets, tests and paths one piece of code names.
func (c *docChecker) checkSpan(text string) []string {
	var problems []string
	words := docShellWords(text)
	var dirs []string // where a `cd DIR` in the span moved relative paths
	for i := 0; i < len(words); i++ {
		w, next := docClean(words[i]), ""
		if i+1 < len(words) {
			next = docClean(words[i+1])
		}
		switch {
		case w == "cd" && next != "":
			dirs = append(dirs, strings.TrimPrefix(next, "./"))
		case w == "make" && docCommandStart(words, i) && docSubcommandWord.MatchString(next):
			// only a command: help text says "make iteration N non-finite"
			if !c.makeTargets[next] {
				problems = append(problems, fmt.Sprintf("make %s: no such target in the Makefile", next))
			}
		case docTemperWord.MatchString(w) && docSubcommandWord.MatchString(next):
			problems = append(problems, c.checkCommand(words[i+1:])...)
		case (w == "-run" || w == "-bench" || w == "-fuzz") && next != "":
			for _, name := range strings.Split(words[i+1], "|") {
				name = strings.Trim(name, "^$")
				if docTestNameRe.MatchString(name) && !c.testPrefix(name) {
					problems = append(problems, fmt.Sprintf("%s %s: no test function matches %s in the repository", w, words[i+1], name))
				}
			}
			i++ // a pattern, not a path
			continue
		case docTestNameRe.MatchString(w) && !c.tests[w]:
			problems = append(problems, fmt.Sprintf("%s: no test function of that name in the repository", w))
		}
		if p := c.checkPath(words[i], dirs); p != "" {
			problems = append(problems, p)
		}
	}
	return problems
}

// docCommandStart reports whether words[i] is where a shell command starts: the first word, or after a
// separator, with only environment assignments (CI=true) between.
func docCommandStart(words []string, i int) bool {
	for j := i - 1; j >= 0; j-- {
		if docShellSeparator(words[j]) {
			return true
		}
		if !docEnvAssign.MatchString(words[j]) {
			return false
		}
	}
	return true
}

// testPrefix reports whether a -run pattern's alternative matches a test: go test matches prefixes.
func (c *docChecker) testPrefix(name string) bool {
	for t := range c.tests {
		if strings.HasPrefix(t, name) {
			return true
		}
	}
	return false
}

// docClean strips the punctuation prose puts around a word: "(temper", "tasks)", "[--out".
func docClean(w string) string { return strings.TrimRight(strings.TrimLeft(w, "(["), ")],;:.") }

// checkCommand checks `temper NAME [SUB] [args and flags]`, words starting at NAME; it stops at the end
// of the shell command (a separator, a comment or a redirection).
func (c *docChecker) checkCommand(words []string) []string {
	name := words[0]
	if name == "help" {
		return nil
	}
	fs, ok := c.flags[name]
	if !ok {
		return []string{fmt.Sprintf("temper %s: %q is not a temper command (commands: %s)", name, name, strings.Join(commandNames(), ", "))}
	}
	var problems []string
	subs := c.subcommands[name]
	for i, w := range words[1:] {
		if docShellSeparator(w) {
			break
		}
		w = docClean(w)
		if i == 0 && len(subs) > 0 && docSubcommandWord.MatchString(w) {
			for _, alt := range strings.Split(w, "|") {
				if !subs[alt] {
					problems = append(problems, fmt.Sprintf("temper %s %s: %q is not a subcommand of temper %s (subcommands: %s)", name, w, alt, name, strings.Join(docSortedKeys(subs), ", ")))
				}
			}
			continue
		}
		if f, ok := docFlagName(w); ok && fs.Lookup(f) == nil && f != "h" && f != "help" {
			problems = append(problems, fmt.Sprintf("temper %s has no flag --%s", name, f))
		}
	}
	return problems
}

func docShellSeparator(w string) bool {
	switch {
	case w == "|" || w == "||" || w == "&&" || w == ";" || w == "&" || w == ")":
		return true
	case strings.HasPrefix(w, "#") || strings.HasPrefix(w, ">") || strings.HasPrefix(w, "2>"):
		return true
	}
	return false
}

// docFlagName returns NAME for a word --NAME or -NAME (=value stripped); -1 and other numbers are values.
func docFlagName(w string) (string, bool) {
	if !strings.HasPrefix(w, "-") {
		return "", false
	}
	f := strings.TrimLeft(w, "-")
	f, _, _ = strings.Cut(f, "=")
	if f == "" || !(f[0] >= 'a' && f[0] <= 'z') {
		return "", false
	}
	return f, true
}

// checkPath checks a word that names a repository path: relative, with a directory, starting at a
// top-level entry of the repository, or ./-relative after a `cd DIR` in the same span. Placeholders
// (runs/RUN/..., STORE/...) start elsewhere and are left alone; * and <name> are globs that must match.
func (c *docChecker) checkPath(w string, dirs []string) string {
	dotRel := strings.HasPrefix(w, "./")
	p := strings.TrimPrefix(strings.Trim(w, "()[],;:'\""), "./")
	p = strings.TrimRight(p, ".")
	if !strings.Contains(p, "/") || strings.Contains(p, "://") || strings.Contains(p, "$") || strings.Contains(p, "...") ||
		strings.Contains(p, "…") || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~") || strings.HasPrefix(p, "../") {
		return ""
	}
	p = docPlaceholder.ReplaceAllString(p, "*") // testdata/<family>/: any family
	first, _, _ := strings.Cut(p, "/")
	var bases []string
	if c.topLevel[first] {
		bases = append(bases, "")
	}
	if dotRel {
		bases = append(bases, dirs...)
	}
	if len(bases) == 0 {
		return ""
	}
	for _, b := range bases {
		if matches, _ := filepath.Glob(filepath.Join(c.root, b, strings.TrimSuffix(p, "/"))); len(matches) > 0 {
			return ""
		}
	}
	return fmt.Sprintf("%s: no such path in the repository", p)
}

// docShellWords splits a command line into words, keeping quoted strings whole (quotes removed).
func docShellWords(s string) []string {
	var words []string
	var cur strings.Builder
	in := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case (r == '\'' || r == '"') && !in:
			// a quote opens only at a word's start: the kind's is one word
			quote, in = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

func docSortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
