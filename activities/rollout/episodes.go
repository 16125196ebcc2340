package rollout

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/activities/tools/toolclient"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/episode"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/tokenize"
)

// runEpisodes plays rs as agentic episodes, batch by batch (cuts as for single-turn samples, so
// shards batch alike), and fills each rollout's tokens, policy mask, log-probs, final answer and
// episode summary, calling beat with the episodes done after each batch (and every few seconds
// while a long-running tool's call runs on the tools queue through remote). It returns the tokens sampled (policy and tool) and the episodes that ended
// without an answer.
func runEpisodes(ctx context.Context, gen episode.Generator, maxContext int, enc data.Encoder, in rolloutapi.GenerateInput, rs []rollout.Rollout,
	prompts [][]int, seeds []uint64, cuts []int, remote toolclient.Dispatcher, beat func(done int)) (tokens, unanswered int, err error) {
	cfg := train.EpisodeConfig(enc, in.MaxTurns, in.MaxNewTokens, in.MaxTokens, maxContext)
	if err := cfg.Validate(); err != nil {
		return 0, 0, temporal.NewNonRetryableApplicationError(fmt.Sprintf("rollout: generate %s/%s: %v", in.Run, in.Phase, err), "InvalidInput", err)
	}
	for b, hi := range cuts {
		lo := 0
		if b > 0 {
			lo = cuts[b-1]
		}
		batch := rs[lo:hi]
		place := func(ctx context.Context) string { // a call's place: the rollout and turn that made it
			i, _ := episode.Index(ctx)
			turn, _ := episode.Turn(ctx)
			name := fmt.Sprintf("%s.%s.tool.iter-%06d", in.Run, in.Phase, in.Iteration)
			if in.Tag != "" {
				name += "-" + in.Tag
			}
			return fmt.Sprintf("%s.%s.t%d", name, batch[i].ID, turn)
		}
		reg, err := train.ToolRegistry(in.Tools, func(i int) tasks.Example {
			r := batch[i]
			return tasks.Example{Task: r.Task, Prompt: r.Prompt, Answer: r.Answer}
		}, toolclient.Remote(remote, place, func() { beat(lo) }))
		if err != nil {
			return 0, 0, temporal.NewNonRetryableApplicationError(fmt.Sprintf("rollout: generate %s/%s: %v", in.Run, in.Phase, err), "InvalidInput", err)
		}
		eps, err := episode.Run(ctx, gen, enc.Tok, reg, prompts[lo:hi], sample.Options{Temperature: in.Temperature, TopP: in.TopP,
			StopTokens: train.StopTokens(enc), Seeds: seeds[lo:hi]}, cfg)
		if err != nil {
			return 0, 0, fmt.Errorf("rollout: generate %s/%s iteration %d: %w", in.Run, in.Phase, in.Iteration, err)
		}
		for j, ep := range eps {
			r := &rs[lo+j]
			Fill(r, ep, enc.Tok)
			r.PolicyVersion = in.PolicyVersion
			tokens += len(ep.Tokens)
			if ep.End != episode.EndAnswer {
				unanswered++
			}
		}
		beat(hi)
	}
	return tokens, unanswered, nil
}

// Fill writes an episode into its rollout.
func Fill(r *rollout.Rollout, ep episode.Episode, tok tokenize.Tokenizer) {
	r.Tokens, r.LogProbs, r.Policy = ep.Tokens, ep.LogProbs, ep.Policy
	r.Completion = ep.Final
	r.StopReason = string(sample.StopToken)
	if ep.End != episode.EndAnswer {
		r.StopReason = string(sample.StopLength)
	}
	r.Ep = &rollout.Episode{Turns: ep.Turns, ToolCalls: len(ep.Calls), ToolErrors: ep.ToolErrors, Checked: ep.Checked,
		CheckPass: ep.CheckPassed, End: string(ep.End), Transcript: tok.Decode(ep.Tokens)}
}
