package rollout

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/activities/tools/toolsapi"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/tools"
)

// scriptedPolicy answers every context with policy(context text), byte by byte, log-prob -0.25.
type scriptedPolicy func(ctx string) string

func (p scriptedPolicy) Generate(prompts [][]int, opts sample.Options) ([]model.Completion, error) {
	enc := train.Encoder()
	out := make([]model.Completion, len(prompts))
	for i, pr := range prompts {
		toks := enc.Tok.Encode(p(enc.Tok.Decode(pr)))
		toks = toks[:min(len(toks), opts.MaxNewTokens)]
		lp := make([]float32, len(toks))
		for j := range lp {
			lp[j] = -0.25
		}
		out[i] = model.Completion{Tokens: toks, LogProbs: lp, StopReason: sample.StopToken}
	}
	return out, nil
}

// lastToolResult is the first line of the last tool message in an episode's context, if any: what
// a scripted policy copies or reacts to.
func lastToolResult(ctx string) (string, bool) {
	open, _ := train.Encoder().Chat.ToolMarkers()
	i := strings.LastIndex(ctx, open)
	if i < 0 {
		return "", false
	}
	res, _, _ := strings.Cut(ctx[i+len(open):], "\n")
	return res, true
}

// chatRollouts poses examples as episodes do: one rollout each, its prompt the user's chat message.
func chatRollouts(t *testing.T, exs []tasks.Example) ([]rollout.Rollout, [][]int) {
	t.Helper()
	enc := train.Encoder()
	var rs []rollout.Rollout
	var prompts [][]int
	for _, ex := range exs {
		ids, err := enc.PromptIDs(tasks.AsChat(ex))
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, rollout.Rollout{ID: ex.ID, Task: ex.Task, Prompt: ex.Prompt, Answer: ex.Answer, PromptTokens: ids})
		prompts = append(prompts, ids)
	}
	return rs, prompts
}

// TestRunEpisodes: rollouts of a bigmul batch become episodes posed as chats; a policy that calls
// calc and copies the result passes, one that checks a wrong answer reads its own task's failure;
// the policy mask covers exactly the policy's turns and the episode summary counts the calls.
func TestRunEpisodes(t *testing.T) {
	task, _ := tasks.Lookup("bigmul")
	exs := tasks.Generate(task, 2, 7, 0)
	enc := train.Encoder()
	rs, prompts := chatRollouts(t, exs)
	open, close := enc.Chat.ToolMarkers()
	policy := scriptedPolicy(func(ctx string) string {
		user := strings.TrimSuffix(strings.Split(ctx, "\n")[1], "=")
		if res, ok := lastToolResult(ctx); ok {
			if strings.HasPrefix(res, "fail") || res == "pass" {
				return "done"
			}
			return res
		}
		if strings.Contains(ctx, exs[1].Prompt) { // the second prompt checks a wrong answer
			return `<tool>{"name":"check","arguments":{"answer":"1"}}</tool>`
		}
		return `<tool>{"name":"calc","arguments":{"expr":"` + user + `"}}</tool>`
	})
	in := rolloutapi.GenerateInput{Run: "r", Phase: "p", Tools: []string{"calc", "check"}, MaxTurns: 3, MaxNewTokens: 80, PolicyVersion: 4}
	tokens, unanswered, err := runEpisodes(context.Background(), policy, 0, enc, in, rs, prompts, []uint64{1, 2}, []int{2}, nil, func(int) {})
	if err != nil {
		t.Fatal(err)
	}
	if unanswered != 0 || tokens != len(rs[0].Tokens)+len(rs[1].Tokens) {
		t.Fatalf("tokens %d, unanswered %d", tokens, unanswered)
	}
	if pass, _ := task.Check(exs[0], rs[0].Completion); !pass || rs[0].Ep.ToolCalls != 1 || rs[0].Ep.Turns != 2 || rs[0].PolicyVersion != 4 {
		t.Fatalf("calc episode: completion %q, %+v", rs[0].Completion, rs[0].Ep)
	}
	if e := rs[1].Ep; !e.Checked || e.CheckPass || !strings.Contains(e.Transcript, open+"fail: 1 is wrong") {
		t.Fatalf("check episode: %+v", e)
	}
	for _, r := range rs {
		text := enc.Tok.Decode(r.Tokens)
		i := strings.Index(text, open)
		j := strings.Index(text, close) + len(close)
		for k := range r.Tokens {
			if r.Policy[k] == (k >= i && k < j) || (r.Policy[k] != (r.LogProbs[k] != 0)) {
				t.Fatalf("%s token %d (%q): policy %v, log-prob %g", r.ID, k, text[k:k+1], r.Policy[k], r.LogProbs[k])
			}
		}
	}
	if _, _, err := runEpisodes(context.Background(), policy, 0, enc, rolloutapi.GenerateInput{Tools: []string{"shell"}, MaxNewTokens: 8}, rs[:1], prompts[:1], []uint64{1}, []int{1}, nil, func(int) {}); err == nil || !strings.Contains(err.Error(), `"shell"`) {
		t.Fatalf("unknown tool: %v", err)
	}
}

// recordingDispatcher answers every ToolCall with the program's "output" and records the IDs.
type recordingDispatcher struct {
	mu  sync.Mutex
	ids []string
}

func (d *recordingDispatcher) Call(_ context.Context, id string, in toolsapi.CallInput) (toolsapi.RunOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ids = append(d.ids, id)
	if strings.Contains(string(in.Args), "boom") {
		return toolsapi.RunOutput{Error: "python: exit status 1: boom", Kind: "failed"}, nil
	}
	return toolsapi.RunOutput{Output: "42"}, nil
}

// TestRunEpisodesRemoteTools: python calls go to the dispatcher (the tools queue) under IDs that name
// run, phase, iteration, rollout and turn, their results (and failures) come back as tool messages,
// and without a dispatcher the episode is told that no tools queue runs python here.
func TestRunEpisodesRemoteTools(t *testing.T) {
	enc := train.Encoder()
	var rs []rollout.Rollout
	var prompts [][]int
	for i, p := range []string{"2*3=", "boom="} {
		ids, err := enc.PromptIDs(tasks.AsChat(tasks.Example{Prompt: p}))
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, rollout.Rollout{ID: fmt.Sprintf("ex-%d", i), Prompt: p, PromptTokens: ids})
		prompts = append(prompts, ids)
	}
	open, _ := enc.Chat.ToolMarkers()
	policy := scriptedPolicy(func(ctx string) string {
		if strings.Contains(ctx, open) {
			return "done"
		}
		code := "print(6*7)"
		if strings.Contains(ctx, "boom") {
			code = "raise SystemExit('boom')"
		}
		return `<tool>{"name":"python","arguments":{"code":"` + code + `"}}</tool>`
	})
	in := rolloutapi.GenerateInput{Run: "run", Phase: "grpo", Iteration: 3, Tag: "s0001", Tools: []string{"python"}, MaxTurns: 2, MaxNewTokens: 80}
	d := &recordingDispatcher{}
	if _, _, err := runEpisodes(context.Background(), policy, 0, enc, in, rs, prompts, []uint64{1, 2}, []int{2}, d, func(int) {}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(d.ids)
	if len(d.ids) != 2 || !strings.HasPrefix(d.ids[0], "run.grpo.tool.iter-000003-s0001.ex-0.t0.python-") ||
		!strings.HasPrefix(d.ids[1], "run.grpo.tool.iter-000003-s0001.ex-1.t0.python-") {
		t.Fatalf("call IDs %q", d.ids)
	}
	if !strings.Contains(rs[0].Ep.Transcript, open+"42\n") || rs[0].Ep.ToolErrors != 0 {
		t.Fatalf("python result: %+v", rs[0].Ep)
	}
	if !strings.Contains(rs[1].Ep.Transcript, open+"error: python: exit status 1: boom\n") || rs[1].Ep.ToolErrors != 1 {
		t.Fatalf("python failure: %+v", rs[1].Ep)
	}
	if _, _, err := runEpisodes(context.Background(), policy, 0, enc, in, rs, prompts, []uint64{1, 2}, []int{2}, nil, func(int) {}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rs[0].Ep.Transcript, "no tools queue") {
		t.Fatalf("without a tools queue: %q", rs[0].Ep.Transcript)
	}
}

// TestRunEpisodesLookup: on the facts task, lookup reads the task's corpus: a policy that looks up
// the key its prompt asks about and copies the value answers exactly; a missing key is an error.
func TestRunEpisodesLookup(t *testing.T) {
	task, _ := tasks.Lookup("facts")
	exs, rs := scriptedEpisodes(t, task, []string{"lookup"}, 80, func(exs []tasks.Example, ctx string) string {
		key := "no such key"
		if strings.Contains(ctx, exs[0].Prompt) {
			key = strings.TrimSuffix(strings.TrimPrefix(exs[0].Prompt, "What is the "), "?")
		}
		return `<tool>{"name":"lookup","arguments":{"key":"` + key + `"}}</tool>`
	})
	if pass, _ := task.Check(exs[0], rs[0].Completion); !pass || rs[0].Ep.ToolErrors != 0 {
		t.Fatalf("looked-up answer %q for %q (answer %q): %+v", rs[0].Completion, exs[0].Prompt, exs[0].Answer, rs[0].Ep)
	}
	if rs[1].Ep.ToolErrors != 1 || !strings.Contains(rs[1].Ep.Transcript, `no entry for "no such key"`) {
		t.Fatalf("missing key: %+v", rs[1].Ep)
	}
}

// TestRunEpisodesRoute: on the route task, a policy that calls the engine its request needs with the
// request's values and copies the job reference passes; one that calls the wrong engine does not.
func TestRunEpisodesRoute(t *testing.T) {
	task, _ := tasks.Lookup("route")
	exs, rs := scriptedEpisodes(t, task, task.(tasks.Agentic).Tools(), 120, func(exs []tasks.Example, ctx string) string {
		for k, ex := range exs {
			if strings.Contains(ctx, ex.Prompt) {
				call := task.(tasks.Agentic).Demonstration(ex).Messages[1].ToolCalls[0]
				if k == 1 { // the wrong engine, same values
					call.Name = map[string]string{"image": "video", "video": "image", "audio": "layout", "layout": "audio"}[call.Name]
				}
				return tools.Format(call)
			}
		}
		return "?"
	})
	if pass, fb := task.Check(exs[0], rs[0].Completion); !pass {
		t.Fatalf("right engine: %q: %s (%s)", rs[0].Completion, fb, rs[0].Ep.Transcript)
	}
	if pass, _ := task.Check(exs[1], rs[1].Completion); pass {
		t.Fatalf("wrong engine passed: %s", rs[1].Ep.Transcript)
	}
}

// scriptedEpisodes runs two-turn episodes (seeds 1, 2) with the given tools on two examples of
// task: after a tool result the policy copies it, otherwise it says reply(exs, context).
func scriptedEpisodes(t *testing.T, task tasks.Task, tools []string, maxNew int, reply func(exs []tasks.Example, ctx string) string) ([]tasks.Example, []rollout.Rollout) {
	t.Helper()
	exs := tasks.Generate(task, 2, 3, 0)
	rs, prompts := chatRollouts(t, exs)
	policy := scriptedPolicy(func(ctx string) string {
		if res, ok := lastToolResult(ctx); ok {
			return res
		}
		return reply(exs, ctx)
	})
	in := rolloutapi.GenerateInput{Run: "r", Phase: "p", Tools: tools, MaxTurns: 2, MaxNewTokens: maxNew}
	if _, _, err := runEpisodes(context.Background(), policy, 0, train.Encoder(), in, rs, prompts, []uint64{1, 2}, []int{2}, nil, func(int) {}); err != nil {
		t.Fatal(err)
	}
	return exs, rs
}
