package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
)

// MaxCompletionBytes bounds the completion a composed verifier reads; a longer one fails without
// being parsed, so no verifier ever scans unbounded text.
const MaxCompletionBytes = 1 << 20

// maxFeedback bounds Verdict.Feedback: it is meant to be appended to a prompt.
const maxFeedback = 600

// Sample is one completion to judge.
type Sample struct {
	Prompt     string `json:"prompt,omitempty"`
	Completion string `json:"completion"`
	// Reference is a JSON object with the task-specific truth: an answer, a schema, constraints.
	// Each verifier reads the keys it knows (the same keys as its params) and ignores the rest, so
	// one reference can serve several composed verifiers. Keys present here override the params.
	Reference json.RawMessage `json:"reference,omitempty"`
}

// Verdict is a verifier's judgement of one sample.
type Verdict struct {
	// Score is in [0, 1]: 1 is fully correct.
	Score float64 `json:"score"`
	// Pass is true when every requirement is met (for binary verifiers, Score == 1).
	Pass bool `json:"pass"`
	// Feedback is a short text a model can read to correct itself. It never reveals the reference
	// answer; it is empty or a courtesy note when Pass is true.
	Feedback string `json:"feedback,omitempty"`
	// Partial holds named sub-scores in [0, 1] (per check, or per component of a composition).
	Partial map[string]float64 `json:"partial,omitempty"`
}

// Verifier judges samples. Verify returns an error only when the sample cannot be judged: a
// missing or malformed reference, a cancelled context, a broken sandbox. Anything wrong with the
// completion itself is a failing Verdict, never an error. Implementations are safe for
// concurrent use.
type Verifier interface {
	Verify(ctx context.Context, s Sample) (Verdict, error)
}

// Func adapts a function to Verifier.
type Func func(ctx context.Context, s Sample) (Verdict, error)

// Verify calls f.
func (f Func) Verify(ctx context.Context, s Sample) (Verdict, error) { return f(ctx, s) }

func pass() Verdict { return Verdict{Score: 1, Pass: true} }

func fail(format string, args ...any) Verdict {
	return Verdict{Score: 0, Feedback: clip(fmt.Sprintf(format, args...), maxFeedback)}
}

// fraction builds a verdict from a number of satisfied checks out of total, with the failures as
// feedback.
func fraction(ok, total int, failures []string, partial map[string]float64) Verdict {
	v := Verdict{Partial: partial}
	if total > 0 {
		v.Score = float64(ok) / float64(total)
	}
	v.Pass = total > 0 && ok == total
	if len(failures) > 0 {
		v.Feedback = listFeedback(failures)
	}
	return v
}

// listFeedback joins failures into one line, keeping the first few.
func listFeedback(failures []string) string {
	const keep = 6
	var b strings.Builder
	for i, f := range failures {
		if i == keep {
			fmt.Fprintf(&b, "; and %d more", len(failures)-keep)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(f)
	}
	return clip(b.String(), maxFeedback)
}

// clip cuts s to at most n bytes at a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - 3
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// quote shows a piece of model output in feedback, shortened.
func quote(s string) string { return fmt.Sprintf("%q", clip(s, 60)) }

// sanitize clamps a verdict to the documented ranges.
func sanitize(v Verdict) Verdict {
	v.Score = clamp01(v.Score)
	for k, p := range v.Partial {
		v.Partial[k] = clamp01(p)
	}
	v.Feedback = clip(v.Feedback, maxFeedback)
	return v
}

func clamp01(x float64) float64 {
	switch {
	case math.IsNaN(x) || x < 0:
		return 0
	case x > 1:
		return 1
	}
	return x
}

// DecodeParams decodes a verifier's params strictly into dst (a pointer to a struct): an unknown
// field is an error naming it and the allowed fields. Empty or null params leave dst unchanged.
func DecodeParams(verifier string, raw json.RawMessage, dst any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		if strings.Contains(err.Error(), "unknown field") {
			return fmt.Errorf("verify: %s params: %w (allowed: %s)", verifier, err, strings.Join(jsonFields(dst), ", "))
		}
		return fmt.Errorf("verify: %s params: %w", verifier, err)
	}
	if dec.More() {
		return fmt.Errorf("verify: %s params: trailing data after the JSON object", verifier)
	}
	return nil
}

// ApplyReference overrides the fields of dst (a pointer to a struct with json tags) whose keys are
// present in the reference object. Other keys are ignored: they belong to other verifiers. Values
// are decoded into fresh memory, so dst may be a shallow copy of a shared config.
func ApplyReference(verifier string, dst any, reference json.RawMessage) error {
	_, err := applyReference(verifier, dst, reference)
	return err
}

// applyReference is ApplyReference that also reports whether any field was set.
func applyReference(verifier string, dst any, reference json.RawMessage) (bool, error) {
	reference = bytes.TrimSpace(reference)
	if len(reference) == 0 || string(reference) == "null" {
		return false, nil
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(reference, &keys); err != nil {
		return false, fmt.Errorf("verify: %s reference: must be a JSON object: %w", verifier, err)
	}
	dv := reflect.ValueOf(dst).Elem()
	fresh := reflect.New(dv.Type())
	t := dv.Type()
	changed := false
	for i := 0; i < t.NumField(); i++ {
		name := jsonName(t.Field(i))
		raw, ok := keys[name]
		if name == "" || !ok {
			continue
		}
		f := fresh.Elem().Field(i)
		if err := json.Unmarshal(raw, f.Addr().Interface()); err != nil {
			return false, fmt.Errorf("verify: %s reference: field %s: %w", verifier, name, err)
		}
		dv.Field(i).Set(f)
		changed = true
	}
	return changed, nil
}

func jsonName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	tag := f.Tag.Get("json")
	if tag == "-" {
		return ""
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		name = f.Name
	}
	return name
}

func jsonFields(dst any) []string {
	t := reflect.TypeOf(dst)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		if n := jsonName(t.Field(i)); n != "" {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Text is a reference value that may be written in JSON as a string or as a number (42, 0.5).
type Text string

// UnmarshalJSON accepts a string or a number.
func (t *Text) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*t = Text(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return errors.New("want a string or a number")
	}
	*t = Text(n.String())
	return nil
}
