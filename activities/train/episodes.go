package train

import (
	"context"
	"fmt"

	"github.com/temperml/temper/algorithms/episode"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/tokenize"
	"github.com/temperml/temper/algorithms/tools"
)

// EpisodeConfig is the episode bounds of a rollout or an evaluation: maxTurns policy turns of
// turnTokens each, maxTokens after the prompt in all (0: maxTurns·turnTokens plus room for tool
// results), within the model's context of maxContext tokens (0: unbounded), with the chat
// template's tool markers.
func EpisodeConfig(chat tokenize.ChatTemplate, maxTurns, turnTokens, maxTokens, maxContext int) episode.Config {
	if maxTurns == 0 {
		maxTurns = 4
	}
	if maxTokens == 0 {
		maxTokens = maxTurns * (turnTokens + 64)
	}
	open, close := chat.ToolMarkers()
	return episode.Config{MaxTurns: maxTurns, TurnTokens: turnTokens, MaxTokens: maxTokens, MaxContext: maxContext, ToolOpen: open, ToolClose: close}
}

// ToolRegistry builds the named built-in tools for a batch of episodes; check judges an answer with
// the task of the episode that calls it (example(i): the i-th episode's example), and remote runs
// lookup reads the corpus of the batch's task (tasks.Corpus), and remote runs
// the long-running ones (python) elsewhere (activities/tools.Remote: on the tools queue; nil: they
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
