package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/reward/rewardapi"
	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/internal/config"
)

// RolloutSpec configures the fan-out of an RL iteration (runs started before the "rl-sharded"
// version ran one rollout.Generate and one reward.Score per iteration, with verdicts inline).
// Shards split the iteration's prompts (rollout.ShardRanges): each shard is one rollout.Generate
// activity any rollout worker takes, then one reward.Score activity any reward worker takes, which
// writes its verdicts beside the shard's rollouts. The policy step reads them from the store. So
// history per iteration grows with the number of shards, never with the number of samples, and
// a failed or killed shard is retried alone. Sampling is seeded per prompt: results do not depend on
// the number of shards.
type RolloutSpec struct {
	Shards int `json:"shards" default:"1" help:"rollout.Generate (and reward.Score) activities per iteration, each taken by any rollout (reward) worker"`
	// SamplesPerShard sizes shards from the batch instead; history then grows with the batch.
	SamplesPerShard int `json:"samples_per_shard" default:"0" help:"size the shards to about this many samples each instead (0: use shards)"`
	// Tools makes every sample an agentic episode (activities/rollout: GenerateInput.Tools).
	Tools     []string `json:"tools,omitempty" help:"agentic episodes: built-in tools the policy may call (calc, check, python: python runs each call as its own activity on the tools queue, in the code sandbox of a tools worker); the task's prompt is the user's message, max_new_tokens bounds each turn, tool results are masked out of the loss"`
	MaxTurns  int      `json:"max_turns,omitempty" help:"with tools: policy turns per episode (0: 4)"`
	MaxTokens int      `json:"max_tokens,omitempty" help:"with tools: token budget of an episode after the prompt, policy and tool tokens (0: max_turns*(max_new_tokens+64))"`
	// Agent makes every sample an agent program's episode (activities/rollout: GenerateInput.Agent;
	// docs/agent-gateway.md).
	Agent *rolloutapi.AgentSpec `json:"agent,omitempty" help:"agent episodes: a program run per episode in the code sandbox against an OpenAI-compatible endpoint serving the policy; its calls are the trajectory, its standard output the answer the verifiers score (docs/agent-gateway.md)"`
}

// Validate names the bad field.
func (r RolloutSpec) Validate() error {
	switch {
	case r.Shards < 1 || r.Shards > 1024:
		return &config.FieldError{Path: "rollout.shards", Msg: fmt.Sprintf("%d: want 1..1024", r.Shards)}
	case r.SamplesPerShard < 0:
		return &config.FieldError{Path: "rollout.samples_per_shard", Msg: fmt.Sprintf("%d: want >= 0 (0: use shards)", r.SamplesPerShard)}
	case r.MaxTurns < 0 || r.MaxTurns > 64:
		return &config.FieldError{Path: "rollout.max_turns", Msg: fmt.Sprintf("%d: want 0 (default 4) to 64", r.MaxTurns)}
	case r.MaxTokens < 0:
		return &config.FieldError{Path: "rollout.max_tokens", Msg: fmt.Sprintf("%d: want >= 0 (0: max_turns*(max_new_tokens+64))", r.MaxTokens)}
	case len(r.Tools) == 0 && (r.MaxTurns != 0 || r.MaxTokens != 0):
		return &config.FieldError{Path: "rollout.tools", Msg: "max_turns and max_tokens bound agentic episodes: set tools too"}
	}
	return checkTools("rollout.tools", r.Tools)
}

// ranges are the prompt ranges of an iteration's shards.
func (r RolloutSpec) ranges(prompts, group int) [][2]int {
	n := r.Shards
	if r.SamplesPerShard > 0 {
		n = min(1024, max(1, (prompts*group+r.SamplesPerShard-1)/r.SamplesPerShard))
	}
	return rolloutapi.ShardRanges(prompts, group, n)
}

// rlFanOut starts an RL iteration's shard activities.
type rlFanOut struct {
	rolloutCtx, rewardCtx workflow.Context
	in                    PhaseInput
	cfg                   *RLConfig
	seed                  uint64
}

// generate starts the shards of iteration iter with the given policy.
func (f rlFanOut) generate(policy string, version, iter int) []workflow.Future {
	var futs []workflow.Future
	for s := range f.cfg.Rollout.ranges(f.cfg.Prompts, f.cfg.Group) {
		futs = append(futs, workflow.ExecuteActivity(f.rolloutCtx, rolloutapi.GenerateName, f.input(policy, version, iter, s)))
	}
	return futs
}

// input is the generation of shard s of iteration iter with the given policy.
func (f rlFanOut) input(policy string, version, iter, s int) rolloutapi.GenerateInput {
	r := f.cfg.Rollout.ranges(f.cfg.Prompts, f.cfg.Group)[s]
	return rolloutapi.GenerateInput{
		Store: f.in.Store, Run: f.in.RunID, Phase: f.in.Phase, Checkpoint: policy, PolicyVersion: version, Iteration: iter,
		Data: f.cfg.Data, Seed: f.seed, Prompts: f.cfg.Prompts, Group: f.cfg.Group, MaxNewTokens: f.cfg.MaxNewTokens,
		Temperature: f.cfg.Temperature, Sampling: f.cfg.Sampling.OrNil(), Tag: rolloutapi.ShardTag(s), PromptLo: r[0], PromptHi: r[1],
		Tools: f.cfg.Rollout.Tools, MaxTurns: f.cfg.Rollout.MaxTurns, MaxTokens: f.cfg.Rollout.MaxTokens, Agent: f.cfg.Rollout.Agent,
	}
}

// score starts the scoring of one shard; its verdicts go to the store.
func (f rlFanOut) score(gen rolloutapi.GenerateOutput) workflow.Future {
	maxFailed := 0
	if f.cfg.SelfCorrect.Retries > 0 {
		maxFailed = f.cfg.SelfCorrect.MaxSamples
	}
	return workflow.ExecuteActivity(f.rewardCtx, rewardapi.ScoreName, rewardapi.ScoreInput{Rollouts: gen.Rollouts, Spec: f.cfg.Reward,
		WriteVerdicts: true, MaxFailed: maxFailed})
}

// rlBatch is an iteration's generated shards and their scoring in flight.
type rlBatch struct {
	gens   []rolloutapi.GenerateOutput
	scores []workflow.Future
}

// await waits for the shards in order, starting each one's scoring as soon as its rollouts exist.
func (f rlFanOut) await(ctx workflow.Context, futs []workflow.Future) (rlBatch, error) {
	var b rlBatch
	for s, fut := range futs {
		var g rolloutapi.GenerateOutput
		if err := fut.Get(ctx, &g); err != nil {
			return rlBatch{}, fmt.Errorf("shard %d of %d: %w", s, len(futs), err)
		}
		b.gens = append(b.gens, g)
		b.scores = append(b.scores, f.score(g))
	}
	return b, nil
}

// started scores shards generated earlier (an async run's pending rollouts after continue-as-new).
func (f rlFanOut) started(gens []rolloutapi.GenerateOutput) rlBatch {
	b := rlBatch{gens: gens}
	for _, g := range gens {
		b.scores = append(b.scores, f.score(g))
	}
	return b
}

// awaitGenerated waits for shards whose scoring is left to a later run (continue-as-new).
func awaitGenerated(ctx workflow.Context, futs []workflow.Future) ([]rolloutapi.GenerateOutput, error) {
	out := make([]rolloutapi.GenerateOutput, len(futs))
	for s, f := range futs {
		if err := f.Get(ctx, &out[s]); err != nil {
			return nil, fmt.Errorf("shard %d of %d: %w", s, len(futs), err)
		}
	}
	return out, nil
}

// drain waits for shards in flight whose results are not wanted (the loop is leaving their policy).
func drain(ctx workflow.Context, futs []workflow.Future) {
	for _, f := range futs {
		_ = f.Get(ctx, nil)
	}
}

// rlScored is an iteration's scored shards: what the policy step reads, and summaries.
type rlScored struct {
	shards  []trainapi.ScoredShard
	sources []string // the shards' rollouts objects, in order
	metrics rewardapi.Metrics
	// failed are the first failed samples (index across the shards, in order) and their feedback.
	failed   []int
	feedback []string
	// tokens and seconds sum the shards' sampled tokens and sampling time.
	tokens  int
	seconds float64
	// Agent episodes: groups dropped and attempts failed, summed over the shards.
	agentDropped, agentFailures int
}

// collect waits for the scoring of every shard and sums up; limit bounds failed.
func (b rlBatch) collect(ctx workflow.Context, limit int) (rlScored, error) {
	var out rlScored
	var judged int
	var sum float64
	offset := 0
	for s, fut := range b.scores {
		var sc rewardapi.ScoreOutput
		if err := fut.Get(ctx, &sc); err != nil {
			return rlScored{}, fmt.Errorf("shard %d of %d: %w", s, len(b.scores), err)
		}
		g := b.gens[s]
		out.shards = append(out.shards, trainapi.ScoredShard{Rollouts: g.Rollouts, Verdicts: sc.VerdictsURI})
		out.sources = append(out.sources, g.Rollouts)
		out.tokens += g.Tokens
		out.seconds += g.Seconds
		out.agentDropped += g.AgentGroupsDropped
		out.agentFailures += g.AgentFailures
		m := sc.Metrics
		out.metrics.Items += m.Items
		out.metrics.Errors += m.Errors
		out.metrics.TimedOut += m.TimedOut
		judged += m.Judged
		sum += m.MeanScore * float64(m.Judged)
		out.metrics.Passed += m.Passed
		for _, f := range sc.Failed {
			if len(out.failed) < limit {
				out.failed = append(out.failed, offset+f.Index)
				out.feedback = append(out.feedback, f.Feedback)
			}
		}
		offset += g.Samples
	}
	out.metrics.Judged = judged
	if judged > 0 {
		out.metrics.MeanScore, out.metrics.PassRate = sum/float64(judged), float64(out.metrics.Passed)/float64(judged)
	}
	return out, nil
}

// tokensPerS is the shards' sampling rate per worker (tokens over the summed sampling time).
func (s rlScored) tokensPerS() float64 {
	if s.seconds <= 0 {
		return 0
	}
	return float64(s.tokens) / s.seconds
}

// rlPipe is an async iteration's shards generating, each one's scoring started as soon as its
// rollouts exist, by a workflow coroutine: the scoring then overlaps the policy step that runs
// meanwhile, instead of standing between the two steps (runs from the "rl-overlap" version on).
type rlPipe struct {
	done  workflow.Future // ready when every shard is generated and its scoring started
	batch rlBatch
	err   error
}

// pipeline starts the coroutine that waits for futs (fan.generate's) and scores each shard.
func (f rlFanOut) pipeline(ctx workflow.Context, futs []workflow.Future) *rlPipe {
	done, set := workflow.NewFuture(ctx)
	p := &rlPipe{done: done}
	workflow.Go(ctx, func(gctx workflow.Context) {
		// Activity options come from the fan's contexts; the coroutine's own context blocks.
		g := f
		g.rewardCtx = workflow.WithActivityOptions(gctx, workflow.GetActivityOptions(f.rewardCtx))
		p.batch, p.err = g.await(gctx, futs)
		set.Set(nil, nil)
	})
	return p
}

// wait returns the generated shards with their scoring started.
func (p *rlPipe) wait(ctx workflow.Context) (rlBatch, error) {
	if err := p.done.Get(ctx, nil); err != nil {
		return rlBatch{}, err
	}
	return p.batch, p.err
}

// drain waits for the shards and their scoring when their results are not wanted.
func (p *rlPipe) drain(ctx workflow.Context) {
	if p == nil {
		return
	}
	b, _ := p.wait(ctx)
	drain(ctx, b.scores)
}
