package verify

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strings"
)

// MathParams configures the "math" verifier. Every field may also be set per sample in the
// reference (usually just "answer").
type MathParams struct {
	// Answer is the reference answer: a number, expression, equation, inequality, interval,
	// tuple, set, matrix or text (see the package doc); a worked solution is read through its
	// \boxed answer.
	Answer Text `json:"answer,omitempty"`
	// Tolerance is relative: |got-want| <= max(AbsTolerance, Tolerance*|want|). Default 1e-6;
	// a negative value means exact. Two integers are compared exactly unless Tolerance is
	// above 1e-6 or AbsTolerance is set: the default absorbs rounding, and integers have none.
	Tolerance float64 `json:"tolerance,omitempty"`
	// AbsTolerance is an absolute tolerance, default 0.
	AbsTolerance float64 `json:"abs_tolerance,omitempty"`
	// Tag names the answer tag, default "answer" (<answer>…</answer>).
	Tag string `json:"tag,omitempty"`
	// Strict requires an explicit final answer (tag, "####" or \boxed); without it a "final
	// answer is" phrase, the whole completion or its last formula or number is taken.
	Strict bool `json:"strict,omitempty"`
	// Percent says what a trailing % means. "either" (default): a reference written with %
	// matches the number and the fraction (50% matches 50 and 0.5), while a completion's %
	// always means /100, so appending % never buys a completion two readings. "value": 50% is
	// 0.5 on both sides. "lenient": a % on either side matches both readings (the completion
	// "50%" then passes for 50 and for 0.5; it is a hedge a policy can learn).
	Percent string `json:"percent,omitempty"`
}

type mathVerifier struct{ p MathParams }

// NewMath builds the "math" verifier.
//
// The final answer is, in order of precedence: the content of <tag>…</tag> (a \boxed{} inside
// it wins), the text after "####", the argument of \boxed{…} or, unless Strict, the answer after
// the last "final answer is" phrase, then unless Strict the whole completion when it is nothing
// but an answer, else its last LaTeX span or stand-alone number or formula (after </think> when
// there is one). When several of the chosen kind are present they must all be equal, otherwise
// the sample fails: hedging ("<answer>3</answer> <answer>4</answer>") earns nothing; boxes joined
// by "and" or commas form one list answer; a self-correction ("no, wait") keeps the last.
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
	p.Tag = cmp.Or(p.Tag, "answer")
	p.Tolerance = cmp.Or(p.Tolerance, 1e-6)
	if math.IsNaN(p.Tolerance) || math.IsInf(p.Tolerance, 0) || p.Tolerance > 1 {
		return fmt.Errorf("verify: math params: tolerance=%g: want a relative tolerance <= 1 (negative = exact)", p.Tolerance)
	}
	if math.IsNaN(p.AbsTolerance) || math.IsInf(p.AbsTolerance, 0) || p.AbsTolerance < 0 {
		return fmt.Errorf("verify: math params: abs_tolerance=%g: want a finite value >= 0", p.AbsTolerance)
	}
	switch p.Percent {
	case "":
		p.Percent = "either"
	case "either", "value", "lenient":
	default:
		return fmt.Errorf("verify: math params: percent=%q: allowed values: either, value, lenient", p.Percent)
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
	want, err := readReference(string(p.Answer))
	if err != nil {
		return Verdict{}, fmt.Errorf("verify: math: reference answer %q: %w", clip(string(p.Answer), 60), err)
	}
	got, fb := finalAnswer(s.Completion, p)
	if fb != "" {
		return fail("%s", fb), nil
	}
	g := parseValue(got, false)
	if err := valueError(g); err != nil {
		return fail("could not read the final answer %s: %v", quote(got), err), nil
	}
	if equalValues(g, want, p) {
		return pass(), nil
	}
	return fail("final answer %s is not correct", quote(got)), nil
}

// readReference parses the reference answer. A reference written as a worked solution is read
// through its \boxed answer.
func readReference(raw string) (value, error) {
	if strings.TrimSpace(raw) == "" {
		return value{}, errNotNumber
	}
	v := parseValue(raw, true)
	if hasText(v) || strings.Contains(raw, `\boxed`) {
		// A reference written as a worked solution: its \boxed or "final answer is" answer.
		if a, fb, ok := explicitAnswer(raw, MathParams{Tolerance: -1}); ok && fb == "" && a != "" {
			v = parseValue(a, true)
		}
	}
	if v.key == "" {
		return value{}, errNotNumber
	}
	return v, valueError(v)
}

// valueError reports a number that is too large or divides by zero anywhere in v.
func valueError(v value) error {
	if v.err != nil {
		return v.err
	}
	if v.x != nil {
		if _, _, err := v.x.exact(v.mask); err != nil {
			return err
		}
	}
	for _, it := range v.items {
		if err := valueError(it); err != nil {
			return err
		}
	}
	return nil
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
// Precedence: <tag> (a \boxed inside it wins), "####", then \boxed answers and "final answer
// is" phrases (explicitAnswer), then, unless Strict, the last LaTeX span or stand-alone number
// of the text (proseAnswer).
func finalAnswer(text string, p MathParams) (string, string) {
	tag := p.Tag
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
			if a, fb, ok := explicitAnswer(t, p); ok {
				if fb != "" {
					return "", fb
				}
				inner = append(inner, a)
			} else {
				inner = append(inner, t)
			}
		}
		return agree(inner, "<"+tag+"> answers", p)
	}
	if h := hashAnswers(text); len(h) > 0 {
		return agree(h, `"####" answers`, p)
	}
	if _, after, ok := cutLast(text, "</think>"); ok && strings.TrimSpace(after) != "" {
		text = after // the reasoning before </think> is a draft, not the answer
	}
	if a, fb, ok := explicitAnswer(text, p); ok {
		return a, fb
	}
	if p.Strict {
		return "", "no final answer found; give it in <" + tag + ">…</" + tag + ">"
	}
	if t := strings.TrimSpace(text); len(t) <= 2*maxExprBytes {
		// A completion that is nothing but an answer ("\frac{1+\sqrt{5}}{2}", "1 000") is read whole.
		if v := parseValue(t, false); !hasText(v) {
			return t, ""
		}
	}
	if a, fb := proseAnswer(text, p); a != "" || fb != "" {
		return a, fb
	}
	return "", "no final answer found; give it in <" + tag + ">…</" + tag + ">"
}

// agree returns the common answer of several, or feedback when they differ or are empty.
func agree(all []string, what string, p MathParams) (string, string) {
	first := strings.TrimSpace(all[0])
	if first == "" || normalizeAnswer(first) == "" {
		return "", "empty final answer"
	}
	fa := parseValue(first, false)
	seen := map[string]bool{first: true}
	for _, o := range all[1:] {
		if o = strings.TrimSpace(o); seen[o] {
			continue // the same text again: no need to parse it
		}
		seen[o] = true
		oa := parseValue(o, false)
		if fa.key != oa.key && !equalValues(oa, fa, p) {
			return "", fmt.Sprintf("%d different %s (%s, %s); give exactly one final answer", len(all), what, quote(first), quote(o))
		}
	}
	return first, ""
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

// cutLast splits s around the last occurrence of sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if k := strings.LastIndex(s, sep); k >= 0 {
		return s[:k], s[k+len(sep):], true
	}
	return s, "", false
}
