package reward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/temperml/temper/activities/reward/sandbox"
	"github.com/temperml/temper/algorithms/verify"
	"github.com/temperml/temper/internal/config"
)

// CodeParams configures the "code" verifier; like every verifier's params, each field may be
// set per sample in the reference (usually "tests").
type CodeParams struct {
	// Language: "python" or "go"; default from the code fence ("```go"), else python.
	Language sandbox.Language `json:"language,omitempty"`
	// Tests are stdin → expected stdout cases.
	Tests []sandbox.TestCase `json:"tests,omitempty"`
	// GoTest is a _test.go harness for the program's package (Go only; replaces Tests).
	GoTest string `json:"go_test,omitempty"`
	// Timeout per case (default: the sandbox's, 5s).
	Timeout config.Duration `json:"timeout,omitempty"`
	// MemoryMB is the address-space limit per case (default: the sandbox's, 512).
	MemoryMB int `json:"memory_mb,omitempty"`
	// Partial scores the fraction of cases passed; default all-or-nothing.
	Partial bool `json:"partial,omitempty"`
}

type codeVerifier struct {
	sb *sandbox.Sandbox
	p  CodeParams
}

// newCodeFactory returns the factory of "code"; without a sandbox it explains why it is missing.
func newCodeFactory(sb *sandbox.Sandbox) verify.Factory {
	return func(params json.RawMessage) (verify.Verifier, error) {
		if sb == nil {
			return nil, errors.New("verify: code: no sandbox on this worker (it needs root on Linux; see activities/reward/sandbox)")
		}
		c := &codeVerifier{sb: sb}
		if err := verify.DecodeParams("code", params, &c.p); err != nil {
			return nil, err
		}
		if err := c.p.validate(); err != nil {
			return nil, err
		}
		return c, nil
	}
}

func (p CodeParams) validate() error {
	switch p.Language {
	case "", sandbox.Python, sandbox.Go:
	default:
		return fmt.Errorf("verify: code params: language=%q: allowed values: %s, %s", p.Language, sandbox.Python, sandbox.Go)
	}
	if p.Timeout < 0 || p.Timeout.D() > 10*time.Minute {
		return fmt.Errorf("verify: code params: timeout=%v: want 0 (default) to 10m", p.Timeout.D())
	}
	if p.MemoryMB < 0 || (p.MemoryMB > 0 && p.MemoryMB < 16) {
		return fmt.Errorf("verify: code params: memory_mb=%d: want 0 (default) or >= 16", p.MemoryMB)
	}
	if p.GoTest != "" && p.Language == sandbox.Python {
		return fmt.Errorf("verify: code params: go_test needs language go")
	}
	return nil
}

var fenceLanguages = map[string]sandbox.Language{
	"python": sandbox.Python, "py": sandbox.Python, "python3": sandbox.Python,
	"go": sandbox.Go, "golang": sandbox.Go,
}

// program picks the code: the last fenced block in the wanted language, else the last fenced
// block, else the whole completion.
func program(completion string, want sandbox.Language) (string, sandbox.Language) {
	bodies, langs := verify.CodeBlocks(completion)
	for i := len(bodies) - 1; i >= 0; i-- {
		if l, ok := fenceLanguages[langs[i]]; ok && (want == "" || l == want) {
			return bodies[i], l
		}
	}
	lang := want
	if lang == "" {
		lang = sandbox.Python
	}
	if len(bodies) > 0 {
		return bodies[len(bodies)-1], lang
	}
	return completion, lang
}

func (c *codeVerifier) Verify(ctx context.Context, s verify.Sample) (verify.Verdict, error) {
	p := c.p
	if err := verify.ApplyReference("code", &p, s.Reference); err != nil {
		return verify.Verdict{}, err
	}
	if err := p.validate(); err != nil {
		return verify.Verdict{}, err
	}
	if len(p.Tests) == 0 && p.GoTest == "" {
		return verify.Verdict{}, errors.New("verify: code: reference has no tests (set \"tests\" or \"go_test\")")
	}
	want := p.Language
	if p.GoTest != "" {
		want = sandbox.Go
	}
	src, lang := program(s.Completion, want)
	if strings.TrimSpace(src) == "" {
		return verify.Verdict{Feedback: "no program found; put it in a ```" + string(lang) + " code block"}, nil
	}
	lim := sandbox.Limits{Timeout: p.Timeout.D(), Memory: int64(p.MemoryMB) << 20}
	rep, err := c.sb.Check(ctx, sandbox.Program{Language: lang, Source: src, GoTest: p.GoTest}, p.Tests, lim)
	if err != nil {
		return verify.Verdict{}, fmt.Errorf("verify: code: %w", err)
	}
	frac := 0.0
	if rep.Total > 0 {
		frac = float64(rep.Passed) / float64(rep.Total)
	}
	v := verify.Verdict{Pass: rep.Verdict == sandbox.VerdictPassed, Partial: map[string]float64{"tests": frac}}
	switch {
	case v.Pass:
		v.Score = 1
	case p.Partial:
		v.Score = frac
	}
	if !v.Pass {
		v.Feedback = codeFeedback(rep)
	}
	return v, nil
}

// codeFeedback says which case failed and why, with the last line of stderr (the exception) or
// the start of the compiler output. Inputs and expected outputs stay hidden.
func codeFeedback(rep sandbox.Report) string {
	if rep.Build != "" {
		return "build failed: " + firstLines(rep.Build, 4, 300)
	}
	for i, c := range rep.Cases {
		if c.Passed {
			continue
		}
		msg := fmt.Sprintf("%d of %d tests passed; test %d: %s", rep.Passed, rep.Total, i+1, c.Reason)
		if last := lastLine(c.Stderr); last != "" {
			msg += ": " + last
		}
		return msg
	}
	return rep.Reason
}

func firstLines(s string, n, max int) string {
	lines := strings.SplitN(strings.TrimSpace(s), "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	out := strings.Join(lines, "; ")
	if len(out) > max {
		out = out[:max] + "..."
	}
	return out
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
