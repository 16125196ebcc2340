package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// LookupTool is the built-in `lookup`: the value of a key in corpus (loaded by the caller, e.g. from
// a file in the store), or an error naming the key. Keys match after trimming spaces and folding
// case, so that a policy's capitalisation does not matter.
func LookupTool(corpus map[string]string) Tool {
	folded := make(map[string]string, len(corpus))
	for k, v := range corpus {
		folded[foldKey(k)] = v
	}
	return Tool{
		Name:        "lookup",
		Description: "the value stored under a key in the task's corpus",
		Schema: json.RawMessage(`{"type":"object","properties":{"key":{"type":"string","minLength":1,"maxLength":256}},
			"required":["key"],"additionalProperties":false}`),
		Run: func(_ context.Context, args json.RawMessage) (string, error) {
			var a struct {
				Key string `json:"key"`
			}
			if err := json.Unmarshal(args, &a); err != nil {
				return "", err
			}
			v, ok := folded[foldKey(a.Key)]
			if !ok {
				return "", fmt.Errorf("no entry for %q", a.Key)
			}
			return v, nil
		},
	}
}

func foldKey(k string) string { return strings.ToLower(strings.TrimSpace(k)) }

// CheckFunc judges a candidate answer for the episode's prompt: pass, and feedback for the policy.
type CheckFunc func(ctx context.Context, answer string) (pass bool, feedback string, err error)

// CheckTool is the built-in `check`: the task's own verifier on a candidate answer, so that a
// policy can test an answer and answer again (self-correction inside the episode). The result is
// "pass" or "fail: <feedback>".
func CheckTool(check CheckFunc) Tool {
	return Tool{
		Name:        "check",
		Description: "test a candidate answer with the task's verifier: pass, or fail with feedback",
		Schema: json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string","maxLength":4096}},
			"required":["answer"],"additionalProperties":false}`),
		Run: func(ctx context.Context, args json.RawMessage) (string, error) {
			var a struct {
				Answer string `json:"answer"`
			}
			if err := json.Unmarshal(args, &a); err != nil {
				return "", err
			}
			pass, feedback, err := check(ctx, a.Answer)
			if err != nil {
				return "", err
			}
			if pass {
				return "pass", nil
			}
			if feedback == "" {
				return "fail", nil
			}
			return "fail: " + feedback, nil
		},
	}
}

// PythonTool is the built-in `python`: a program's standard output, run by run (the activities
// layer's code sandbox; algorithms do no I/O). It is LongRunning: a rollout worker sends each call to
// the `tools` task queue as its own activity, so a slow or crashing program is retried and visible
// in the Web UI without losing its episode. The result is the program's stdout (trimmed), or an
// error with the failure and the end of stderr.
func PythonTool(run Func) Tool {
	return Tool{
		Name:        "python",
		Description: "run a Python 3 program (no network, no files outside its work directory) and return what it prints",
		Schema: json.RawMessage(`{"type":"object","properties":{"code":{"type":"string","minLength":1,"maxLength":16384}},
			"required":["code"],"additionalProperties":false}`),
		Timeout:     PythonTimeout,
		LongRunning: true,
		Run:         run,
	}
}

// PythonTimeout bounds one python call from the episode's side: queueing on the tools queue, the
// program itself (the sandbox's own limit is shorter) and a retry after a killed worker.
const PythonTimeout = 2 * time.Minute

// Builtin names the built-in tools, the values `rollout.tools` and `eval.tools` allow.
var Builtin = append([]string{"calc", "check", "lookup", "python"}, Studio...)

// Env supplies what some built-ins need from the caller's layer.
type Env struct {
	// Check judges an answer with the episode's task (the `check` tool); nil: check unavailable.
	Check CheckFunc
	// Corpus is what `lookup` reads (the task's facts); nil: lookup unavailable.
	Corpus map[string]string
	// Python runs a program (the `python` tool, in a sandbox); nil: python runs nowhere here.
	Python Func
	// Remote, when set, runs every LongRunning tool elsewhere: a call of tool t runs Remote(t)
	// instead of t.Run, after the arguments passed t's schema here.
	Remote func(t Tool) Func
}

// Builtins builds a registry of the named built-in tools: calc, and check with the task's verifier
// (check may be nil when names has no "check"). python needs a sandbox and lookup a corpus: see Build.
func Builtins(names []string, check CheckFunc) (*Registry, error) {
	return Build(names, Env{Check: check})
}

// Build builds a registry of the named built-in tools with what env supplies, naming a tool that
// cannot run here.
func Build(names []string, env Env) (*Registry, error) {
	var ts []Tool
	for _, n := range names {
		var t Tool
		switch n {
		case "calc":
			t = CalcTool()
		case "check":
			if env.Check == nil {
				return nil, fmt.Errorf("tools: check: no verifier to check with")
			}
			t = CheckTool(env.Check)
		case "lookup":
			if env.Corpus == nil {
				return nil, fmt.Errorf("tools: lookup: no corpus to look up (a task with a corpus, such as facts)")
			}
			t = LookupTool(env.Corpus)
		case "python":
			if env.Python == nil && env.Remote == nil {
				return nil, fmt.Errorf("tools: python: no sandbox in this process and no tools queue to send calls to")
			}
			t = PythonTool(env.Python)
		case "image", "video", "audio", "layout":
			var err error
			if t, err = StudioTool(n); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("tools: unknown built-in %q: allowed %s", n, strings.Join(Builtin, ", "))
		}
		if t.LongRunning && env.Remote != nil {
			t.Run = env.Remote(t)
		}
		ts = append(ts, t)
	}
	return NewRegistry(ts...)
}
