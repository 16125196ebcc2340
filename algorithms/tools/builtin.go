package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
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

// Builtin names the tools Builtins builds.
var Builtin = []string{"calc", "check"}

// Builtins builds a registry of the named built-in tools: calc, and check with the task's verifier
// (check may be nil when names has no "check"). lookup needs a corpus and python a sandbox: they are
// registered by their callers.
func Builtins(names []string, check CheckFunc) (*Registry, error) {
	var ts []Tool
	for _, n := range names {
		switch n {
		case "calc":
			ts = append(ts, CalcTool())
		case "check":
			if check == nil {
				return nil, fmt.Errorf("tools: check: no verifier to check with")
			}
			ts = append(ts, CheckTool(check))
		default:
			return nil, fmt.Errorf("tools: unknown built-in %q: allowed %s", n, strings.Join(Builtin, ", "))
		}
	}
	return NewRegistry(ts...)
}
