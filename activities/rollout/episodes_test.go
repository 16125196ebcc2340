package rollout

import (
	"context"
	"strings"
	"testing"

	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/tasks"
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

// TestRunEpisodes: rollouts of a bigmul batch become episodes posed as chats; a policy that calls
// calc and copies the result passes, one that checks a wrong answer reads its own task's failure;
// the policy mask covers exactly the policy's turns and the episode summary counts the calls.
func TestRunEpisodes(t *testing.T) {
	task, _ := tasks.Lookup("bigmul")
	exs := tasks.Generate(task, 2, 7, 0)
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
	open, close := enc.Chat.ToolMarkers()
	policy := scriptedPolicy(func(ctx string) string {
		user := strings.TrimSuffix(strings.Split(ctx, "\n")[1], "=")
		if i := strings.LastIndex(ctx, open); i >= 0 {
			res, _, _ := strings.Cut(ctx[i+len(open):], "\n")
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
	in := GenerateInput{Run: "r", Phase: "p", Tools: []string{"calc", "check"}, MaxTurns: 3, MaxNewTokens: 80, PolicyVersion: 4}
	tokens, unanswered, err := runEpisodes(context.Background(), policy, enc, in, rs, prompts, []uint64{1, 2}, []int{2}, func(int) {})
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
	if _, _, err := runEpisodes(context.Background(), policy, enc, GenerateInput{Tools: []string{"python"}, MaxNewTokens: 8}, rs[:1], prompts[:1], []uint64{1}, []int{1}, func(int) {}); err == nil || !strings.Contains(err.Error(), `"python"`) {
		t.Fatalf("unknown tool: %v", err)
	}
}
