package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
)

// Factory builds a verifier from its params (a JSON object, possibly empty). It validates the
// params and returns an error naming the bad field.
type Factory func(params json.RawMessage) (Verifier, error)

// Registry maps verifier names to factories. It is safe for concurrent use.
type Registry struct {
	mu sync.RWMutex
	f  map[string]Factory
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{f: map[string]Factory{}} }

// Builtins returns a new registry holding the built-in verifiers: math, digits, format, json, layout,
// aesthetic, countdown, sudoku, exact, contains and choice. Callers may Register more (the reward activity
// adds "code").
func Builtins() *Registry {
	r := NewRegistry()
	for name, f := range map[string]Factory{
		"math": NewMath, "digits": NewDigits, "format": NewFormat, "json": NewJSON, "layout": NewLayout, "aesthetic": NewAesthetic,
		"countdown": NewCountdown, "sudoku": NewSudoku,
		"exact": NewExact, "contains": NewContains, "choice": NewChoice,
	} {
		r.f[name] = f
	}
	return r
}

// Register adds a factory under name; a name may be registered once.
func (r *Registry) Register(name string, f Factory) error {
	if !validTagName(name) {
		return fmt.Errorf("verify: register %q: want letters, digits, '_' or '-'", name)
	}
	if f == nil {
		return fmt.Errorf("verify: register %q: nil factory", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.f[name]; dup {
		return fmt.Errorf("verify: register %q: already registered", name)
	}
	r.f[name] = f
	return nil
}

// Replace puts f in place of the factory registered under name (a worker's fuller version of a
// built-in, whose params are the same: "aesthetic" with the renderer's check).
func (r *Registry) Replace(name string, f Factory) error {
	if f == nil {
		return fmt.Errorf("verify: replace %q: nil factory", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.f[name]; !ok {
		return fmt.Errorf("verify: replace %q: not registered", name)
	}
	r.f[name] = f
	return nil
}

// Names lists the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.f))
	for n := range r.f {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// New builds the verifier registered under name.
func (r *Registry) New(name string, params json.RawMessage) (Verifier, error) {
	r.mu.RLock()
	f, ok := r.f[name]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("verify: unknown verifier %q; allowed: %s", name, strings.Join(r.Names(), ", "))
	}
	return f(params)
}

// Spec is a weighted composition of verifiers, the config form of a reward.
type Spec struct {
	Verifiers []Component `json:"verifiers"`
}

// Component is one verifier of a Spec.
type Component struct {
	// Name is a registered verifier name.
	Name string `json:"name"`
	// As labels the component in Verdict.Partial and metrics; default Name. Labels are unique,
	// so a verifier used twice needs As on at least one use.
	As string `json:"as,omitempty"`
	// Weight >= 0; 0 means 1. ReportOnly components are scored for metrics but neither weigh in
	// the score nor gate Pass.
	Weight     float64         `json:"weight,omitempty"`
	ReportOnly bool            `json:"report_only,omitempty"`
	Params     json.RawMessage `json:"params,omitempty"`
}

// Label returns As, or Name when As is empty.
func (c Component) Label() string {
	if c.As != "" {
		return c.As
	}
	return c.Name
}

// Validate checks the spec against the built-in verifiers (see Registry.Validate).
func (s Spec) Validate() error { return Builtins().Validate(s) }

// Validate checks the spec: at least one scored component, known names, unique labels, finite
// non-negative weights, and params each factory accepts. Errors name the field
// ("verifiers[1].name") and the allowed values.
func (r *Registry) Validate(s Spec) error {
	_, err := r.Compose(s)
	return err
}

// Compose builds the composition of a spec from the built-in verifiers.
func Compose(s Spec) (*Composite, error) { return Builtins().Compose(s) }

// Compose builds the verifier of a spec.
func (r *Registry) Compose(s Spec) (*Composite, error) {
	if len(s.Verifiers) == 0 {
		return nil, fmt.Errorf("verify: spec: verifiers is empty; allowed names: %s", strings.Join(r.Names(), ", "))
	}
	c := &Composite{}
	labels := map[string]int{}
	scored := 0
	for i, comp := range s.Verifiers {
		field := fmt.Sprintf("verifiers[%d]", i)
		if comp.Name == "" {
			return nil, fmt.Errorf("verify: spec: %s.name is empty; allowed: %s", field, strings.Join(r.Names(), ", "))
		}
		if comp.As != "" && (!validTagName(comp.As) || strings.Contains(comp.As, "/")) {
			return nil, fmt.Errorf("verify: spec: %s.as=%q: want letters, digits, '_' or '-'", field, comp.As)
		}
		label := comp.Label()
		if j, dup := labels[label]; dup {
			return nil, fmt.Errorf("verify: spec: %s: label %q already used by verifiers[%d]; set \"as\" to tell them apart", field, label, j)
		}
		labels[label] = i
		w := comp.Weight
		if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
			return nil, fmt.Errorf("verify: spec: %s.weight=%g: want a finite value >= 0 (0 means 1)", field, w)
		}
		if w == 0 {
			w = 1
		}
		if p := bytes.TrimSpace(comp.Params); len(p) > 0 && p[0] != '{' && string(p) != "null" {
			return nil, fmt.Errorf("verify: spec: %s.params: want a JSON object, got %s", field, clip(string(p), 40))
		}
		v, err := r.New(comp.Name, comp.Params)
		if err != nil {
			return nil, fmt.Errorf("verify: spec: %s (%s): %w", field, comp.Name, err)
		}
		if comp.ReportOnly {
			w = 0
		} else {
			scored++
		}
		c.parts = append(c.parts, part{label: label, weight: w, v: v})
	}
	if scored == 0 {
		return nil, fmt.Errorf("verify: spec: every component is report_only; at least one must be scored")
	}
	return c, nil
}

// Composite is the verifier of a Spec. Its score is the weighted mean of the scored components;
// it passes when every scored component passes. Partial holds each component's score under its
// label, and each component's own sub-scores as "label/sub". Feedback joins the failing
// components' feedback as "label: feedback".
type Composite struct {
	parts []part
}

type part struct {
	label  string
	weight float64
	v      Verifier
}

// Labels lists the component labels in spec order.
func (c *Composite) Labels() []string {
	out := make([]string, len(c.parts))
	for i, p := range c.parts {
		out[i] = p.label
	}
	return out
}

// Verify runs every component. An error from any component (an unusable reference) is returned
// wrapped with its label; a completion longer than MaxCompletionBytes fails without being read.
func (c *Composite) Verify(ctx context.Context, s Sample) (Verdict, error) {
	if len(s.Completion) > MaxCompletionBytes {
		v := fail("output longer than %d bytes", MaxCompletionBytes)
		v.Partial = map[string]float64{}
		for _, p := range c.parts {
			v.Partial[p.label] = 0
		}
		return v, nil
	}
	out := Verdict{Pass: true, Partial: map[string]float64{}}
	var sum, wsum float64
	var fb []string
	for _, p := range c.parts {
		if err := ctx.Err(); err != nil {
			return Verdict{}, fmt.Errorf("verify: %s: %w", p.label, err)
		}
		v, err := p.v.Verify(ctx, s)
		if err != nil {
			return Verdict{}, fmt.Errorf("verify: %s: %w", p.label, err)
		}
		v = sanitize(v)
		out.Partial[p.label] = v.Score
		for k, sub := range v.Partial {
			out.Partial[p.label+"/"+k] = sub
		}
		if p.weight == 0 {
			continue
		}
		sum += p.weight * v.Score
		wsum += p.weight
		if !v.Pass {
			out.Pass = false
			if v.Feedback != "" {
				fb = append(fb, p.label+": "+v.Feedback)
			}
		}
	}
	if wsum > 0 {
		out.Score = sum / wsum
	}
	out.Feedback = clip(strings.Join(fb, " | "), maxFeedback)
	return out, nil
}
