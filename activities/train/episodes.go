package train

import (
	"context"
	"fmt"

	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/episode"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/tools"
)

// EpisodeConfig is the episode bounds of a rollout or an evaluation: maxTurns policy turns of
// turnTokens each, maxTokens after the prompt in all (0: maxTurns·turnTokens plus room for tool
// results), within the model's context of maxContext tokens (0: unbounded), in the encoder's
// conversation format: the model's own tool-call convention when it has its own chat template
// (enc.Model), else the fixed template's tool markers.
func EpisodeConfig(enc data.Encoder, maxTurns, turnTokens, maxTokens, maxContext int) episode.Config {
	if maxTurns == 0 {
		maxTurns = 4
	}
	if maxTokens == 0 {
		maxTokens = maxTurns * (turnTokens + 64)
	}
	cfg := episode.Config{MaxTurns: maxTurns, TurnTokens: turnTokens, MaxTokens: maxTokens, MaxContext: maxContext}
	if enc.Model != nil {
		cfg.Syntax = *enc.Model
		return cfg
	}
	cfg.ToolOpen, cfg.ToolClose = enc.Chat.ToolMarkers()
	return cfg
}

// StopTokens are the ids that end a policy's turn: the model's end-of-turn tokens when it has its
// own chat template, else the tokenizer's EOS (the byte-level models').
func StopTokens(enc data.Encoder) []int {
	if enc.Model != nil {
		if ids := enc.Model.StopIDs(enc.Tok); len(ids) > 0 {
			return ids
		}
	}
	return []int{enc.Tok.Special().EOS}
}

// ToolRegistry builds the named built-in tools for a batch of episodes; check judges an answer with
// the task of the episode that calls it (example(i): the i-th episode's example), and remote runs
// lookup reads the corpus of the batch's task (tasks.Corpus), and remote runs
// the long-running ones (python) elsewhere (toolclient.Remote: on the tools queue; nil: they
// cannot run in this process and the registry says so).
func ToolRegistry(names []string, example func(i int) tasks.Example, remote func(tools.Tool) tools.Func) (*tools.Registry, error) {
	var corpus map[string]string // lookup reads the batch's task's corpus (a batch is one task's)
	if t, err := tasks.Lookup(example(0).Task); err == nil {
		if c, ok := t.(tasks.Corpus); ok {
			corpus = c.Corpus()
		}
	}
	return tools.Build(names, tools.Env{Remote: remote, Corpus: corpus, Check: func(ctx context.Context, answer string) (bool, string, error) {
		i, ok := episode.Index(ctx)
		if !ok {
			return false, "", fmt.Errorf("check called outside an episode")
		}
		ex := example(i)
		if t, err := tasks.Lookup(ex.Task); err == nil && ex.Task != "" {
			pass, fb := t.Check(ex, answer)
			return pass, fb, nil
		}
		return Passes(ex, answer), "", nil
	}})
}
