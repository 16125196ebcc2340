package episode

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/temperml/temper/algorithms/chat"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/tokenize"
)

// TestModelSyntaxEpisode: with a model's own convention (Qwen3's template), the policy's
// <tool_call> turn is parsed and run, the result comes back as the template's tool turn up to the
// next generation prompt, and only the policy's tokens are trained.
func TestModelSyntaxEpisode(t *testing.T) {
	b, err := os.ReadFile("../chat/testdata/qwen3/tokenizer_config.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := chat.FromConfig("qwen3", b, nil, "", "", chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	call := "<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expr\": \"12345*6789\"}}\n</tool_call><|im_end|>"
	gen := &scripted{policy: func(ctx string) string {
		if i := strings.LastIndex(ctx, "<tool_response>\n"); i >= 0 {
			res, _, _ := strings.Cut(ctx[i+len("<tool_response>\n"):], "\n")
			return res + "<|im_end|>"
		}
		return call
	}}
	c := Config{MaxTurns: 4, TurnTokens: 200, MaxTokens: 800, Syntax: f}
	var codec tokenize.Byte
	prompt, err := f.Prompt(codec, []tokenize.Message{{Role: tokenize.RoleUser, Content: "12345*6789="}})
	if err != nil {
		t.Fatal(err)
	}
	eps, err := Run(context.Background(), gen, codec, registry(t), [][]int{prompt}, sample.Options{}, c)
	if err != nil {
		t.Fatal(err)
	}
	ep := eps[0]
	if ep.End != EndAnswer || ep.Turns != 2 || len(ep.Calls) != 1 || ep.Calls[0].Name != "calc" || ep.ToolErrors != 0 {
		t.Fatalf("episode: %+v", ep)
	}
	tool := "\n<|im_start|>user\n<tool_response>\n83810205\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
	if got := codec.Decode(ep.Tokens); got != call+tool+"83810205<|im_end|>" {
		t.Fatalf("tokens spell %q", got)
	}
	for k := range ep.Tokens {
		if inTool := k >= len(call) && k < len(call)+len(tool); ep.Policy[k] == inTool {
			t.Fatalf("token %d: policy=%v", k, ep.Policy[k])
		}
	}
}
