package tools

import (
	"context"
	"encoding/json"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/tokenize"
)

func TestCalcHandComputed(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{"48213*9071", "437340123"},
		{"123456789012345678901234567890 * 987654321098765432109876543210", "121932631137021795226185032733622923332237463801111263526900"},
		{"2^64", "18446744073709551616"},
		{"2^-3", "0.125"},
		{"-(3 + 4) * 2", "-14"},
		{"1/3", "1/3"},
		{"7/4", "1.75"},
		{"0.1 + 0.2", "0.3"},
		{"10 - 2 - 3", "5"}, // left-associative
		{"2^3^2", "512"},    // right-associative
		{"1_000_000 * 3", "3000000"},
		{"  ( ( 5 ) )", "5"},
	} {
		v, err := Calc(c.expr)
		if err != nil {
			t.Errorf("Calc(%q): %v", c.expr, err)
			continue
		}
		if got := FormatRat(v); got != c.want {
			t.Errorf("Calc(%q) = %s, want %s", c.expr, got, c.want)
		}
	}
}

// TestCalcMatchesBig: random products and sums of 4–6 digit numbers (the agentic multiplication
// task's range) against math/big.
func TestCalcMatchesBig(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		a, b, c := rng.Int64N(999_000)+1000, rng.Int64N(999_000)+1000, rng.Int64N(999_000)+1000
		want := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
		want.Sub(want, big.NewInt(c))
		v, err := Calc(big.NewInt(a).String() + " * " + big.NewInt(b).String() + " - " + big.NewInt(c).String())
		if err != nil || FormatRat(v) != want.String() {
			t.Fatalf("%d*%d-%d = %v (%v), want %s", a, b, c, v, err, want)
		}
	}
}

func TestCalcRejects(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{"1/0", "division by zero"},
		{"0^-1", "division by zero"},
		{"2^100", "exponent"},
		{"2^0.5", "exponent"},
		{"3 +", "number was expected"},
		{"(1 + 2", "missing )"},
		{"1 + x", `unexpected "x"`},
		{"1.2.3", "bad number"},
		{"4 4", `unexpected "4"`},
		{strings.Repeat("9", 600), "at most 512"},
		{strings.Repeat("99999999999^64*", 30) + "1", "digits"},
	} {
		_, err := Calc(c.expr)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Calc(%.40q): %v, want an error containing %q", c.expr, err, c.want)
		}
	}
}

func newTestRegistry(t *testing.T, extra ...Tool) *Registry {
	t.Helper()
	r, err := NewRegistry(append([]Tool{CalcTool(), LookupTool(map[string]string{"Capital of Zorbia": "Quell"}),
		CheckTool(func(_ context.Context, answer string) (bool, string, error) {
			if strings.TrimSpace(answer) == "42" {
				return true, "", nil
			}
			return false, "expected a different number", nil
		})}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCallSchemaErrors: a call whose arguments break the tool's schema is refused before the tool
// runs, and the error names the tool and the failing argument.
func TestCallSchemaErrors(t *testing.T) {
	ran := false
	r := newTestRegistry(t, Tool{Name: "spy", Schema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`),
		Run: func(context.Context, json.RawMessage) (string, error) { ran = true; return "ok", nil }})
	for _, c := range []struct {
		call tokenize.ToolCall
		kind ErrKind
		want string
	}{
		{tokenize.ToolCall{Name: "calc", Arguments: json.RawMessage(`{}`)}, ErrArguments, "calc: arguments does not match the schema: at (root)"},
		{tokenize.ToolCall{Name: "calc", Arguments: json.RawMessage(`{"expr": 12}`)}, ErrArguments, "at /expr"},
		{tokenize.ToolCall{Name: "calc", Arguments: json.RawMessage(`{"expr": "1+1", "mode": "fast"}`)}, ErrArguments, "mode"},
		{tokenize.ToolCall{Name: "spy", Arguments: json.RawMessage(`{"n": "three"}`)}, ErrArguments, "at /n"},
		{tokenize.ToolCall{Name: "spy", Arguments: json.RawMessage(`{"n": 1.5}`)}, ErrArguments, "at /n"},
		{tokenize.ToolCall{Name: "spy", Arguments: json.RawMessage(`{"n": `)}, ErrArguments, "not JSON"},
		{tokenize.ToolCall{Name: "nope"}, ErrUnknownTool, `unknown tool "nope": allowed ["calc" "check" "lookup" "spy"]`},
		{tokenize.ToolCall{Name: "calc", Arguments: json.RawMessage(`{"expr": "1/0"}`)}, ErrFailed, "calc: calc: division by zero"},
		{tokenize.ToolCall{Name: "lookup", Arguments: json.RawMessage(`{"key": "capital of atlantis"}`)}, ErrFailed, "no entry"},
	} {
		res := r.Call(context.Background(), c.call)
		if res.Kind != c.kind || !strings.Contains(res.Err, c.want) || res.Output != "" {
			t.Errorf("%s %s: %+v, want kind %s and an error containing %q", c.call.Name, c.call.Arguments, res, c.kind, c.want)
		}
		if !strings.HasPrefix(res.Message(), "error: ") {
			t.Errorf("message %q does not say error", res.Message())
		}
	}
	if ran {
		t.Error("a tool ran on arguments its schema refuses")
	}
	if res := r.Call(context.Background(), tokenize.ToolCall{Name: "spy", Arguments: json.RawMessage(`{"n": 3}`)}); res.Output != "ok" || !ran {
		t.Errorf("valid call: %+v", res)
	}
}

func TestBuiltins(t *testing.T) {
	r := newTestRegistry(t)
	for _, c := range []struct {
		call tokenize.ToolCall
		want string
	}{
		{tokenize.ToolCall{Name: "calc", Arguments: json.RawMessage(`{"expr": "48213 * 9071"}`)}, "437340123"},
		{tokenize.ToolCall{Name: "lookup", Arguments: json.RawMessage(`{"key": " capital OF zorbia "}`)}, "Quell"},
		{tokenize.ToolCall{Name: "check", Arguments: json.RawMessage(`{"answer": "41"}`)}, "fail: expected a different number"},
		{tokenize.ToolCall{Name: "check", Arguments: json.RawMessage(`{"answer": "42"}`)}, "pass"},
	} {
		if res := r.Call(context.Background(), c.call); res.Err != "" || res.Output != c.want {
			t.Errorf("%s %s = %+v, want %q", c.call.Name, c.call.Arguments, res, c.want)
		}
	}
}

// TestCallTimeout: a tool past its timeout is abandoned and reported as timed out, whether or not it
// honours its context; a tool that panics is an error, not a crash.
func TestCallTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	r := newTestRegistry(t,
		Tool{Name: "polite", Timeout: 50 * time.Millisecond, Run: func(ctx context.Context, _ json.RawMessage) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		}},
		Tool{Name: "stubborn", Timeout: 50 * time.Millisecond, Run: func(context.Context, json.RawMessage) (string, error) {
			<-release
			return "late", nil
		}},
		Tool{Name: "broken", Run: func(context.Context, json.RawMessage) (string, error) { panic("boom") }},
	)
	for _, name := range []string{"polite", "stubborn"} {
		start := time.Now()
		res := r.Call(context.Background(), tokenize.ToolCall{Name: name})
		if res.Kind != ErrTimeout || !strings.Contains(res.Err, "timed out after 50ms") {
			t.Errorf("%s: %+v, want a timeout", name, res)
		}
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("%s: returned after %s", name, el)
		}
	}
	if res := r.Call(context.Background(), tokenize.ToolCall{Name: "broken"}); res.Kind != ErrFailed || !strings.Contains(res.Err, "panicked: boom") {
		t.Errorf("broken: %+v", res)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if res := r.Call(ctx, tokenize.ToolCall{Name: "polite"}); res.Kind != ErrFailed || !strings.Contains(res.Err, "canceled") {
		t.Errorf("cancelled episode: %+v", res)
	}
}

func TestRegisterRejects(t *testing.T) {
	run := func(context.Context, json.RawMessage) (string, error) { return "", nil }
	for _, c := range []struct {
		tools []Tool
		want  string
	}{
		{[]Tool{{Name: "Calc", Run: run}}, "name must match"},
		{[]Tool{{Name: "x", Run: run}, {Name: "x", Run: run}}, "already registered"},
		{[]Tool{{Name: "x"}}, "no function"},
		{[]Tool{{Name: "x", Run: run, Schema: json.RawMessage(`{"type": 3}`)}}, "schema"},
		{[]Tool{{Name: "x", Run: run, Schema: json.RawMessage(`{"$ref": "http://example.com/s.json"}`)}}, "schema"},
		{[]Tool{{Name: "x", Run: run, Timeout: -time.Second}}, "timeout"},
	} {
		if _, err := NewRegistry(c.tools...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error containing %q", c.tools[len(c.tools)-1].Name, err, c.want)
		}
	}
}

func TestParseCall(t *testing.T) {
	for _, c := range []struct {
		text      string
		found     bool
		name, arg string
		err       string
	}{
		{"The answer is 12.", false, "", "", ""},
		{`I will compute. <tool>{"name": "calc", "arguments": {"expr": "3*4"}}</tool>`, true, "calc", `{"expr": "3*4"}`, ""},
		{`<tool>{"name":"calc","arguments":null}</tool>`, true, "calc", "", ""},
		{`<tool>{"name":"calc"}</tool> trailing`, true, "calc", "", ""},
		{`<tool>{"name": "calc", "arguments": {"expr": "3*4"}}`, true, "", "", "without </tool>"},
		{`<tool>calc(3*4)</tool>`, true, "", "", "not a JSON object"},
		{`<tool>{"name": "calc", "args": {}}</tool>`, true, "", "", "not a JSON object"},
		{`<tool>{"arguments": {}}</tool>`, true, "", "", "without a name"},
		{`<tool>{"name": "calc", "arguments": [1]}</tool>`, true, "", "", "must be a JSON object"},
		{`<tool>{"name": "a"} {"name": "b"}</tool>`, true, "", "", "more than one"},
	} {
		call, found, err := ParseCall(c.text)
		if found != c.found || (c.err == "" && err != nil) || (c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err))) {
			t.Errorf("ParseCall(%q) = %+v, %v, %v; want found %v, error %q", c.text, call, found, err, c.found, c.err)
			continue
		}
		if c.err == "" && (call.Name != c.name || string(call.Arguments) != c.arg) {
			t.Errorf("ParseCall(%q) = %s %s, want %s %s", c.text, call.Name, call.Arguments, c.name, c.arg)
		}
	}
	// Format round-trips through ParseCall.
	in := tokenize.ToolCall{Name: "lookup", Arguments: json.RawMessage(`{"key":"k"}`)}
	out, found, err := ParseCall("x " + Format(in) + " y")
	if !found || err != nil || out.Name != in.Name || string(out.Arguments) != string(in.Arguments) {
		t.Errorf("round trip: %+v %v %v", out, found, err)
	}
	if _, _, err := ParseCall(Format(tokenize.ToolCall{Name: "calc"})); err != nil {
		t.Errorf("a call without arguments does not round-trip: %v", err)
	}
}

// TestBuildRemote: with Env.Remote, python (long-running) runs through it after its schema check
// here, while calc stays local; without a runner or a remote, python is refused by name.
func TestBuildRemote(t *testing.T) {
	var sent []string
	r, err := Build([]string{"calc", "python"}, Env{Remote: func(tl Tool) Func {
		if !tl.LongRunning {
			t.Errorf("remote asked for %s, which is not long-running", tl.Name)
		}
		return func(_ context.Context, args json.RawMessage) (string, error) {
			sent = append(sent, tl.Name+" "+string(args))
			return "42", nil
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res := r.Call(context.Background(), tokenize.ToolCall{Name: "python", Arguments: json.RawMessage(`{"code":"print(6*7)"}`)}); res.Output != "42" {
		t.Fatalf("python = %+v", res)
	}
	if res := r.Call(context.Background(), tokenize.ToolCall{Name: "python", Arguments: json.RawMessage(`{"program":"x"}`)}); res.Kind != ErrArguments {
		t.Fatalf("python with a bad argument = %+v", res)
	}
	if res := r.Call(context.Background(), tokenize.ToolCall{Name: "calc", Arguments: json.RawMessage(`{"expr":"2*3"}`)}); res.Output != "6" {
		t.Fatalf("calc = %+v", res)
	}
	if len(sent) != 1 || sent[0] != `python {"code":"print(6*7)"}` {
		t.Fatalf("sent %q: want the one valid python call", sent)
	}
	if _, err := Build([]string{"python"}, Env{}); err == nil || !strings.Contains(err.Error(), "python") {
		t.Fatalf("python with nothing to run it: %v", err)
	}
	local, err := Build([]string{"python"}, Env{Python: func(context.Context, json.RawMessage) (string, error) { return "here", nil }})
	if err != nil {
		t.Fatal(err)
	}
	if res := local.Call(context.Background(), tokenize.ToolCall{Name: "python", Arguments: json.RawMessage(`{"code":"1"}`)}); res.Output != "here" {
		t.Fatalf("local python = %+v", res)
	}
}

// TestStudioTools: each engine returns the job reference of its parameters (the route task's
// answer), and refuses by its schema a value the studio does not serve.
func TestStudioTools(t *testing.T) {
	r, err := Build(Studio, Env{})
	if err != nil {
		t.Fatal(err)
	}
	res := r.Call(context.Background(), tokenize.ToolCall{Name: "video", Arguments: json.RawMessage(`{"seconds": 10, "subject": "a fox running"}`)})
	if want := tasks.RouteJob("video", map[string]any{"subject": "a fox running", "seconds": 10}); res.Err != "" || res.Output != want {
		t.Fatalf("video = %+v, want %q", res, want)
	}
	for _, c := range []tokenize.ToolCall{
		{Name: "image", Arguments: json.RawMessage(`{"subject": "a cat", "style": "crayon"}`)},
		{Name: "video", Arguments: json.RawMessage(`{"subject": "a cat", "seconds": 1200}`)},
		{Name: "audio", Arguments: json.RawMessage(`{"mood": "calm"}`)},
		{Name: "layout", Arguments: json.RawMessage(`{"format": "poster", "title": "x", "color": "red"}`)},
	} {
		if res := r.Call(context.Background(), c); res.Kind != ErrArguments {
			t.Errorf("%s %s = %+v: want a schema refusal", c.Name, c.Arguments, res)
		}
	}
}
