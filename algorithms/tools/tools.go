package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/temperml/temper/algorithms/tokenize"
	"github.com/temperml/temper/algorithms/verify"
)

// Func runs a tool on arguments that already passed its schema. It must honour ctx (its deadline is
// the tool's timeout); the returned text goes back to the policy.
type Func func(ctx context.Context, args json.RawMessage) (string, error)

// Tool is one callable tool.
type Tool struct {
	Name        string
	Description string
	// Schema is the JSON Schema of the arguments object.
	Schema json.RawMessage
	// Timeout bounds one call; 0 means DefaultTimeout.
	Timeout time.Duration
	// LongRunning asks the activities layer to run the tool as its own activity (retried and
	// visible in the Web UI) instead of inside the rollout activity.
	LongRunning bool
	Run         Func
}

// DefaultTimeout bounds a call whose tool sets no Timeout.
const DefaultTimeout = 5 * time.Second

// Registry holds tools by name. Build it before use; it is then safe for concurrent calls.
type Registry struct {
	tools   map[string]Tool
	schemas map[string]*jsonschema.Schema
}

// NewRegistry registers tools, rejecting a duplicate or nameless tool, a tool without a function,
// or a schema that does not compile.
func NewRegistry(ts ...Tool) (*Registry, error) {
	r := &Registry{tools: map[string]Tool{}, schemas: map[string]*jsonschema.Schema{}}
	for _, t := range ts {
		if err := r.Register(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

var toolName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// Register adds one tool.
func (r *Registry) Register(t Tool) error {
	switch {
	case !toolName.MatchString(t.Name):
		return fmt.Errorf("tools: register %q: name must match %s", t.Name, toolName)
	case r.tools[t.Name].Run != nil:
		return fmt.Errorf("tools: register %q: already registered", t.Name)
	case t.Run == nil:
		return fmt.Errorf("tools: register %q: no function", t.Name)
	case t.Timeout < 0:
		return fmt.Errorf("tools: register %q: timeout %s: must be ≥ 0", t.Name, t.Timeout)
	}
	schema := t.Schema
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	s, err := verify.CompileSchema(schema)
	if err != nil {
		return fmt.Errorf("tools: register %q: schema: %w", t.Name, err)
	}
	r.tools[t.Name], r.schemas[t.Name] = t, s
	return nil
}

// Names lists the registered tools, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.tools))
	for n := range r.tools {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Get returns a registered tool.
func (r *Registry) Get(name string) (Tool, bool) {
	t, ok := r.tools[name]
	return t, ok
}

// Result is what a call returns to the policy. Err is set (and Output empty) when the call was
// refused (unknown tool, arguments against the schema), timed out or failed; the episode goes on
// either way, with the error as the tool message.
type Result struct {
	Output   string        `json:"output,omitempty"`
	Err      string        `json:"error,omitempty"`
	Kind     ErrKind       `json:"kind,omitempty"`
	Duration time.Duration `json:"duration"`
}

// ErrKind classifies a failed call, for the per-iteration tool-error metrics.
type ErrKind string

const (
	ErrUnknownTool ErrKind = "unknown_tool"
	ErrArguments   ErrKind = "arguments"
	ErrTimeout     ErrKind = "timeout"
	ErrFailed      ErrKind = "failed"
)

// Message is the tool message the policy reads: the output, or "error: ..." for a failed call.
func (res Result) Message() string {
	if res.Err != "" {
		return "error: " + res.Err
	}
	return res.Output
}

// Call checks c's arguments against its tool's schema and runs it under the tool's timeout. A tool
// that does not return by its deadline is abandoned (its goroutine is left to finish; tools must
// honour ctx) and the call reports a timeout.
func (r *Registry) Call(ctx context.Context, c tokenize.ToolCall) Result {
	start := time.Now()
	fail := func(kind ErrKind, format string, a ...any) Result {
		return Result{Err: fmt.Sprintf(format, a...), Kind: kind, Duration: time.Since(start)}
	}
	t, ok := r.tools[c.Name]
	if !ok {
		return fail(ErrUnknownTool, "unknown tool %q: allowed %q", c.Name, r.Names())
	}
	args := c.Arguments
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage(`{}`)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return fail(ErrArguments, "%s: arguments are not JSON: %v", c.Name, err)
	}
	if err := r.schemas[c.Name].Validate(inst); err != nil {
		return fail(ErrArguments, "%s: arguments %s", c.Name, verify.SchemaFeedback(err))
	}
	timeout := t.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type outcome struct {
		out string
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- outcome{err: fmt.Errorf("panicked: %v", p)}
			}
		}()
		out, err := t.Run(cctx, args)
		done <- outcome{out, err}
	}()
	select {
	case o := <-done:
		if o.err != nil {
			if errors.Is(o.err, context.DeadlineExceeded) && cctx.Err() != nil {
				return fail(ErrTimeout, "%s: timed out after %s", c.Name, timeout)
			}
			return fail(ErrFailed, "%s: %v", c.Name, o.err)
		}
		return Result{Output: o.out, Duration: time.Since(start)}
	case <-cctx.Done():
		if ctx.Err() != nil {
			return fail(ErrFailed, "%s: %v", c.Name, ctx.Err())
		}
		return fail(ErrTimeout, "%s: timed out after %s", c.Name, timeout)
	}
}

// Call markers in the policy's text.
const (
	OpenTag  = tokenize.ToolOpenTag
	CloseTag = tokenize.ToolCloseTag
)

// ParseCall finds the first tool call in text. found is false when text has no OpenTag (a final
// answer); err describes a call that is there but malformed (no closing tag, not one JSON object
// with a name and optional arguments object), and is what the policy is told.
func ParseCall(text string) (c tokenize.ToolCall, found bool, err error) {
	i := strings.Index(text, OpenTag)
	if i < 0 {
		return tokenize.ToolCall{}, false, nil
	}
	body := text[i+len(OpenTag):]
	j := strings.Index(body, CloseTag)
	if j < 0 {
		return tokenize.ToolCall{}, true, fmt.Errorf("tool call without %s", CloseTag)
	}
	dec := json.NewDecoder(strings.NewReader(body[:j]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return tokenize.ToolCall{}, true, fmt.Errorf("tool call is not a JSON object {\"name\": ..., \"arguments\": {...}}: %v", err)
	}
	if dec.More() {
		return tokenize.ToolCall{}, true, fmt.Errorf("tool call holds more than one JSON value")
	}
	if c.Name == "" {
		return tokenize.ToolCall{}, true, fmt.Errorf("tool call without a name")
	}
	if a := bytes.TrimSpace(c.Arguments); string(a) == "null" {
		c.Arguments = nil
	} else if len(a) > 0 && a[0] != '{' {
		return tokenize.ToolCall{}, true, fmt.Errorf("tool call %q: arguments must be a JSON object", c.Name)
	}
	return c, true, nil
}

// Format writes c as the policy would (demonstrations for SFT use it).
func Format(c tokenize.ToolCall) string { return tokenize.FormatToolCall(c) }
