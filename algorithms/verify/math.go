package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strings"
)

// MathParams configures the "math" verifier. Every field may also be set per sample in the
// reference (usually just "answer").
type MathParams struct {
	// Answer is the reference answer: a number, fraction, \frac, simple expression, percentage,
	// or, when it is none of those, a string compared after LaTeX normalisation.
	Answer Text `json:"answer,omitempty"`
	// Tolerance is relative: |got-want| <= max(AbsTolerance, Tolerance*|want|). Default 1e-6;
	// a negative value means exact.
	Tolerance float64 `json:"tolerance,omitempty"`
	// AbsTolerance is an absolute tolerance, default 0.
	AbsTolerance float64 `json:"abs_tolerance,omitempty"`
	// Tag names the answer tag, default "answer" (<answer>…</answer>).
	Tag string `json:"tag,omitempty"`
	// Strict requires an explicit final answer (tag, "####" or \boxed); without it the last
	// number in the text is taken.
	Strict bool `json:"strict,omitempty"`
	// Percent says what a trailing % means: "either" (default: 50% matches 50 and 0.5) or
	// "value" (50% is 0.5 only).
	Percent string `json:"percent,omitempty"`
}

type mathVerifier struct{ p MathParams }

// NewMath builds the "math" verifier.
//
// The final answer is, in order of precedence: the content of <tag>…</tag> (a \boxed{} inside
// it wins), the text after "####", the argument of \boxed{…}, and unless Strict the last number
// in the text. When several of the chosen kind are present they must all be equal, otherwise the
// sample fails: hedging ("<answer>3</answer> <answer>4</answer>") earns nothing.
func NewMath(params json.RawMessage) (Verifier, error) {
	m := &mathVerifier{}
	if err := DecodeParams("math", params, &m.p); err != nil {
		return nil, err
	}
	if err := m.p.validate(false); err != nil {
		return nil, err
	}
	return m, nil
}

func (p *MathParams) validate(needAnswer bool) error {
	if p.Tag == "" {
		p.Tag = "answer"
	}
	if p.Tolerance == 0 {
		p.Tolerance = 1e-6
	}
	if math.IsNaN(p.Tolerance) || math.IsInf(p.Tolerance, 0) || p.Tolerance > 1 {
		return fmt.Errorf("verify: math params: tolerance=%g: want a relative tolerance <= 1 (negative = exact)", p.Tolerance)
	}
	if math.IsNaN(p.AbsTolerance) || math.IsInf(p.AbsTolerance, 0) || p.AbsTolerance < 0 {
		return fmt.Errorf("verify: math params: abs_tolerance=%g: want a finite value >= 0", p.AbsTolerance)
	}
	switch p.Percent {
	case "":
		p.Percent = "either"
	case "either", "value":
	default:
		return fmt.Errorf("verify: math params: percent=%q: allowed values: either, value", p.Percent)
	}
	if !validTagName(p.Tag) {
		return fmt.Errorf("verify: math params: tag=%q: want letters, digits, '_' or '-'", p.Tag)
	}
	if needAnswer && strings.TrimSpace(string(p.Answer)) == "" {
		return fmt.Errorf("verify: math: reference has no answer (set \"answer\" in the reference or params)")
	}
	return nil
}

func (m *mathVerifier) Verify(ctx context.Context, s Sample) (Verdict, error) {
	p := m.p
	if err := ApplyReference("math", &p, s.Reference); err != nil {
		return Verdict{}, err
	}
	if err := p.validate(true); err != nil {
		return Verdict{}, err
	}
	want, err := readAnswer(string(p.Answer))
	if err != nil {
		return Verdict{}, fmt.Errorf("verify: math: reference answer %q: %w", clip(string(p.Answer), 60), err)
	}
	got, fb := finalAnswer(s.Completion, p.Tag, p.Strict)
	if fb != "" {
		return fail("%s", fb), nil
	}
	g, err := readAnswer(got)
	if err != nil {
		return fail("could not read the final answer %s: %v", quote(got), err), nil
	}
	if want.num == nil && g.num == nil {
		if g.key() == want.key() {
			return pass(), nil
		}
		return fail("final answer %s is not correct", quote(got)), nil
	}
	if want.num != nil && g.num == nil {
		return fail("could not read a number from the final answer %s", quote(got)), nil
	}
	if want.num == nil && g.num != nil {
		return fail("final answer %s is not correct", quote(got)), nil
	}
	if matchNumbers(g, want, p) {
		return pass(), nil
	}
	return fail("final answer %s is not correct", quote(got)), nil
}

// answer is a parsed final answer: a number (num != nil) or normalised text.
type answer struct {
	num     *big.Rat
	percent bool // written with a trailing %; num is already divided by 100
	text    string
}

// readAnswer parses a final answer. A string that is not a number or expression is returned as
// normalised text (err == nil); err is reserved for numbers that are too large or divide by zero.
func readAnswer(raw string) (answer, error) {
	s := normalizeMath(raw)
	if s == "" {
		return answer{}, errNotNumber
	}
	a := answer{text: s}
	body := s
	for _, suf := range []string{`\%`, "%"} {
		if strings.HasSuffix(body, suf) {
			body = strings.TrimSpace(strings.TrimSuffix(body, suf))
			a.percent = true
			break
		}
	}
	v, _, err := evalExpr(body, modeMath)
	if err != nil {
		if err == errTooBig || err == errDivZero {
			return answer{}, err
		}
		// "5 cm", "x = 5", "$5.00 total": a single number inside words still counts; two
		// different numbers ("3 or 4") are ambiguous and leave it as text.
		nums := numbersIn(body)
		if len(nums) == 0 {
			return a, nil
		}
		var only *big.Rat
		for _, n := range nums {
			nv, _, err := evalExpr(normalizeMath(n), modeMath)
			if err != nil {
				return a, nil
			}
			if only != nil && only.Cmp(nv) != 0 {
				return a, nil
			}
			only = nv
		}
		v = only
	}
	if a.percent {
		v = new(big.Rat).Quo(v, big.NewRat(100, 1))
	}
	a.num = v
	return a, nil
}

// key is the text form compared when an answer is not a number: spaces do not matter.
func (a answer) key() string { return strings.ReplaceAll(a.text, " ", "") }

// candidates lists the values an answer may stand for under the percent rule.
func (a answer) candidates(mode string) []*big.Rat {
	if !a.percent || mode == "value" {
		return []*big.Rat{a.num}
	}
	return []*big.Rat{a.num, new(big.Rat).Mul(a.num, big.NewRat(100, 1))}
}

func matchNumbers(got, want answer, p MathParams) bool {
	for _, g := range got.candidates(p.Percent) {
		for _, w := range want.candidates(p.Percent) {
			if withinTolerance(g, w, p.Tolerance, p.AbsTolerance) {
				return true
			}
		}
	}
	return false
}

// withinTolerance compares exactly: |g-w| <= max(abs, rel*|w|), tolerances taken as exact
// binary fractions.
func withinTolerance(g, w *big.Rat, rel, abs float64) bool {
	diff := new(big.Rat).Sub(g, w)
	diff.Abs(diff)
	if diff.Sign() == 0 {
		return true
	}
	bound := new(big.Rat)
	if rel > 0 {
		r := new(big.Rat).SetFloat64(rel)
		bound.Mul(r, new(big.Rat).Abs(w))
	}
	if abs > 0 {
		if a := new(big.Rat).SetFloat64(abs); a.Cmp(bound) > 0 {
			bound = a
		}
	}
	return diff.Cmp(bound) <= 0
}

// finalAnswer extracts the final answer, or returns feedback saying why there is none usable.
func finalAnswer(text, tag string, strict bool) (string, string) {
	if strings.TrimSpace(text) == "" {
		return "", "empty output; give a final answer in <" + tag + ">…</" + tag + ">"
	}
	tagged, err := tagContents(text, tag)
	if err != nil {
		return "", err.Error()
	}
	if len(tagged) > 0 {
		var inner []string
		for _, t := range tagged {
			if b, err := boxedContents(t); err == nil && len(b) > 0 {
				inner = append(inner, b...)
			} else {
				inner = append(inner, t)
			}
		}
		return agree(inner, "<"+tag+"> answers")
	}
	if h := hashAnswers(text); len(h) > 0 {
		return agree(h, `"####" answers`)
	}
	boxed, err := boxedContents(text)
	if err != nil {
		return "", err.Error()
	}
	if len(boxed) > 0 {
		return agree(boxed, `\boxed answers`)
	}
	if strict {
		return "", "no final answer found; give it in <" + tag + ">…</" + tag + ">"
	}
	if n, ok := lastNumber(text); ok {
		return n, ""
	}
	return "", "no final answer found; give it in <" + tag + ">…</" + tag + ">"
}

// agree returns the common answer of several, or feedback when they differ or are empty.
func agree(all []string, what string) (string, string) {
	first := strings.TrimSpace(all[0])
	if first == "" {
		return "", "empty final answer"
	}
	fa, _ := readAnswer(first)
	for _, o := range all[1:] {
		oa, _ := readAnswer(o)
		same := fa.key() == oa.key()
		if fa.num != nil && oa.num != nil {
			same = fa.num.Cmp(oa.num) == 0
		}
		if !same {
			return "", fmt.Sprintf("%d different %s (%s, %s); give exactly one final answer", len(all), what, quote(first), quote(strings.TrimSpace(o)))
		}
	}
	return first, ""
}

var (
	textCmdRE  = regexp.MustCompile(`\\(?:text|textbf|textrm|mathrm|mathbf|mbox|displaystyle|boxed)\s*\{([^{}]*)\}`)
	degreeRE   = regexp.MustCompile(`\^\s*\{?\\circ\}?|°`)
	assignRE   = regexp.MustCompile(`^[^=]{0,24}=`)
	spacingCmd = strings.NewReplacer(`\left`, "", `\right`, "", `\!`, "", `\,`, "", `\;`, "", `\:`, "", `\ `, " ", "~", " ",
		"{,}", "", `\dfrac`, `\frac`, `\tfrac`, `\frac`, "−", "-", "–", "-", "×", `*`, "÷", "/", "·", "*", "⋅", "*",
		`\$`, "", "$", "", `\(`, "", `\)`, "", `\[`, "", `\]`, "")
)

// normalizeMath strips LaTeX decoration that does not change a value.
func normalizeMath(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 4*maxExprBytes {
		return s[:4*maxExprBytes]
	}
	s = spacingCmd.Replace(s)
	for i := 0; i < 4 && textCmdRE.MatchString(s); i++ {
		s = textCmdRE.ReplaceAllString(s, " $1 ")
	}
	s = degreeRE.ReplaceAllString(s, "")
	// "x = 5", "2+3 = 5": the value is what follows the last '='.
	for {
		loc := assignRE.FindStringIndex(s)
		if loc == nil || !strings.Contains(s, "=") {
			break
		}
		s = s[loc[1]:]
	}
	s = strings.TrimSpace(s)
	s = strings.TrimRight(s, ".,;: ")
	s = strings.Join(strings.Fields(s), " ")
	return s
}

func validTagName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && s[i] != '_' && s[i] != '-' {
			return false
		}
	}
	return true
}
