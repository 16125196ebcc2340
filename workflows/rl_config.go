package workflows

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/verify"
	"github.com/temperml/temper/internal/config"
)

// BacktrackSpec configures back-tracking: when held-out exact match falls more than Tolerance below the
// best so far, or a loss or gradient is NaN/Inf, the loop restores the last good checkpoint, scales the
// learning rate and the KL coefficient, records the branch, and goes on, at most Budget times.
type BacktrackSpec struct {
	Tolerance float64 `json:"tolerance" default:"0.1" help:"allowed drop of held-out exact match below the best before back-tracking"`
	Budget    int     `json:"budget" default:"3" help:"back-tracks allowed in the phase; one more fails it"`
	LRFactor  float64 `json:"lr_factor" default:"0.5" help:"learning rate multiplier at each back-track"`
	KLFactor  float64 `json:"kl_factor" default:"2" help:"KL coefficient multiplier at each back-track (when kl_beta > 0)"`
}

// SelfCorrectSpec configures sample-level self-correction: after scoring, up to MaxSamples failed
// samples (the first in file order) are regenerated with the verifier's feedback appended to their
// prompt, for up to Retries rounds (a round retries the previous round's failures); those that then
// pass are kept as data (with Resample, the retry is a fresh sample of the original prompt):
// runs/RUN/PHASE/corrections/iter-N-retryR.jsonl, original prompt → corrected
// completion, a data.train file for an SFT phase. The policy update uses first attempts only: a
// correction was sampled under another prompt, so its log-probs are not the policy's for the original.
type SelfCorrectSpec struct {
	Retries    int `json:"retries" default:"0" help:"regeneration rounds for failed samples, with the verifier's feedback (0: off)"`
	MaxSamples int `json:"max_samples" default:"64" help:"failed samples retried per iteration at most"`
	// Resample retries with the original prompt instead: a model never trained to read feedback
	// (the tiny demo models) answers the feedback prompt with nothing.
	Resample bool `json:"resample" help:"retry with the original prompt (a fresh sample) instead of appending the verifier's feedback"`
}

// RLConfig configures the RL phase kinds (grpo, dapo, dr_grpo, gspo, rloo, reinforce_pp, cispo, ppo,
// online_dpo).
type RLConfig struct {
	Data         trainapi.DataSpec `json:"data"`
	Reward       verify.Spec       `json:"reward" help:"verifiers and weights; empty: the task's own exact checker"`
	Iterations   int               `json:"iterations" default:"40" help:"rollout → reward → train iterations"`
	Prompts      int               `json:"prompts" default:"16" help:"prompts per iteration (fresh draws of the task, never held-out ones)"`
	Group        int               `json:"group" default:"8" help:"samples per prompt (G)"`
	MaxNewTokens int               `json:"max_new_tokens" default:"8" help:"generation budget per sample"`
	Temperature  float64           `json:"temperature" default:"1" help:"sampling temperature of rollouts"`
	// Sampling are the rollouts' sampling controls, also those of the phase's evaluations (greedy
	// exact match: the repetition penalty and stop strings; pass@k: all of them). The behaviour
	// log-probs stay the model's own (temperature 1, untruncated: algorithms/sample).
	Sampling        sample.Controls      `json:"sampling" help:"sampling controls of rollouts and evaluations: top_p, top_k, min_p, repetition_penalty, stop (strings); off by default; the behaviour log-probs stay the model's own full softmax"`
	Loss            losscfg.PolicyConfig `json:"loss"`
	Optimizer       trainapi.Optim       `json:"optimizer"`
	Epochs          int                  `json:"epochs" default:"1" help:"optimizer passes over each iteration's rollouts"`
	Minibatch       int                  `json:"minibatch" default:"0" help:"rows per optimizer step; 0: all rollouts in one step"`
	DynamicSampling bool                 `json:"dynamic_sampling" help:"drop groups whose rewards are all equal (DAPO); default on for dapo"`
	Mode            string               `json:"mode" default:"sync" help:"sync | async: async generates iteration k+1 with policy v while step k trains"`
	MaxStaleness    int                  `json:"max_staleness" default:"1" help:"async: iterations generated ahead of the step, so rollouts lag the trained policy by up to this many versions (1..16; 1: one-step-off)"`
	Partial         bool                 `json:"partial" help:"async: generations continue across policy steps in segments (segment_tokens each), each token tagged with the version that sampled it"`
	SegmentTokens   int                  `json:"segment_tokens" default:"0" help:"partial: tokens a row samples per segment, one segment per policy step (0: ceil(max_new_tokens/(max_staleness+1)))"`
	EvalEvery       int                  `json:"eval_every" default:"10" help:"evaluate held-out exact match every N iterations (and at the end)"`
	MaxSeconds      float64              `json:"max_seconds" default:"0" help:"also stop after the iteration that reaches this much training wall time (0: no limit)"`
	KeepLast        int                  `json:"keep_last" default:"3" help:"policy checkpoints kept per branch besides the best (the last good one back-tracking returns to)"`
	Eval            EvalSpec             `json:"eval"`
	Backtrack       BacktrackSpec        `json:"backtrack"`
	SelfCorrect     SelfCorrectSpec      `json:"self_correct"`
	// InjectNaNAt poisons the advantages of this iteration (1-based; tests of back-tracking).
	InjectNaNAt int `json:"inject_nan_at,omitempty" help:"testing: make iteration N's update non-finite"`
	// InjectRegressionAt reads the evaluation after this iteration (1-based) as a regression below
	// the tolerance (tests of back-tracking on regression).
	InjectRegressionAt int             `json:"inject_regression_at,omitempty" help:"testing: read the evaluation after iteration N as a regression"`
	HeartbeatTimeout   config.Duration `json:"heartbeat_timeout" default:"30s"`
	// PPO is set for the ppo kind only (its defaults: train.DefaultPPOConfig).
	PPO *trainapi.PPOConfig `json:"ppo,omitempty" help:"ppo phase only: GAE γ/λ, KL in the reward, value-head seed (value_coef, value_clip, entropy_coef are under loss)"`
	// Preference is set for the online_dpo kind only (rl_dpo.go): its pairwise loss.
	Preference *losscfg.Preference `json:"preference,omitempty" help:"online_dpo phase only: the pairwise loss of each prompt's best-vs-worst pair, kind dpo or ipo, beta (× backtrack.kl_factor at each back-track), label_smoothing, sft_coef"`
	// Rollout fans generation and scoring out over workers (rl_shards.go).
	Rollout RolloutSpec `json:"rollout"`

	kind string // the phase kind, set by defaultRLConfig: loss.algorithm must match it
}

// evalTools are the tools of the phase's evaluations: eval.tools, else rollout.tools (an agentic
// phase is measured on episodes like the ones it trains on).
func (c *RLConfig) evalTools() []string {
	if len(c.Eval.Tools) > 0 {
		return c.Eval.Tools
	}
	return c.Rollout.Tools
}

// evalMaxNewTokens is the evaluations' budget per generation: eval.max_new_tokens, but at least the
// rollouts' max_new_tokens per turn when the evaluation takes its episodes from rollout.tools (its
// default of 8 tokens cut every tool call short: every held-out episode was a tool error), or from
// rollout.agent (the agent's budget per model call).
func (c *RLConfig) evalMaxNewTokens() int {
	if (len(c.Eval.Tools) == 0 && len(c.Rollout.Tools) > 0) || c.Rollout.Agent != nil {
		return max(c.Eval.MaxNewTokens, c.MaxNewTokens)
	}
	return c.Eval.MaxNewTokens
}

// evalMaxTurns goes with evalTools.
func (c *RLConfig) evalMaxTurns() int {
	if c.Eval.MaxTurns > 0 || len(c.Eval.Tools) > 0 {
		return c.Eval.MaxTurns
	}
	return c.Rollout.MaxTurns
}

func defaultRLConfig(algo string) *RLConfig {
	c := &RLConfig{
		Data:       trainapi.DataSpec{TrainExamples: 1, HeldoutExamples: 200},
		Iterations: 40, Prompts: 16, Group: 8, MaxNewTokens: 8, Temperature: 1,
		Loss: losscfg.DefaultPolicyConfig(algo),
		// A 20-iteration warmup by default: the phase's AdamW is fresh, and without a warmup its first
		// updates move every weight by about lr (see train.PolicyLR; docs/benchmarks.md, bench rl-vs-sft: exact match 0.615
		// at iteration 20 without it, 0.725 with it, from a 0.720 base).
		Optimizer: trainapi.Optim{LR: 1e-4, WarmupSteps: 20, MinLRRatio: 1, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, ClipNorm: 1},
		Epochs:    1, DynamicSampling: algo == losscfg.AlgoDAPO, Mode: "sync", MaxStaleness: 1, EvalEvery: 10,
		Eval:             EvalSpec{EvalCadence: EvalCadence{Before: true}, Examples: 200, MaxNewTokens: 8, PassK: 1, Temperature: 1},
		Backtrack:        BacktrackSpec{Tolerance: 0.1, Budget: 3, LRFactor: 0.5, KLFactor: 2},
		SelfCorrect:      SelfCorrectSpec{MaxSamples: 64},
		HeartbeatTimeout: config.Duration(30 * time.Second),
		KeepLast:         3,
		Rollout:          RolloutSpec{Shards: 1},
		kind:             algo,
	}
	if algo == losscfg.AlgoPPO {
		ppo := trainapi.DefaultPPOConfig()
		c.PPO = &ppo
	}
	return c
}

// Validate names the bad field and its allowed values.
func (c *RLConfig) Validate() error {
	if err := c.Data.Validate(); err != nil {
		return err
	}
	if err := c.validateLoss(); err != nil {
		return err
	}
	if err := c.validateDPO(); err != nil {
		return err
	}
	ppo := c.kind == losscfg.AlgoPPO
	if err := c.Optimizer.Validate(); err != nil {
		return err
	}
	if err := c.validateRollout(); err != nil {
		return err
	}
	if len(c.Reward.Verifiers) > 0 {
		if err := rewardRegistry().Validate(c.Reward); err != nil {
			return &config.FieldError{Path: "reward", Msg: err.Error()}
		}
	}
	switch {
	case c.Iterations < 1:
		return &config.FieldError{Path: "iterations", Msg: "must be >= 1"}
	case c.Prompts < 1:
		return &config.FieldError{Path: "prompts", Msg: "must be >= 1"}
	case c.Group < 1 || (c.Group < 2 && !ppo):
		return &config.FieldError{Path: "group", Msg: "must be >= 2 (advantages compare samples of a prompt; ppo: >= 1)"}
	case c.MaxNewTokens < 1:
		return &config.FieldError{Path: "max_new_tokens", Msg: "must be >= 1"}
	case c.Temperature <= 0:
		return &config.FieldError{Path: "temperature", Msg: "must be > 0 (rollouts sample)"}
	case c.SelfCorrect.Retries < 0 || c.SelfCorrect.Retries > 5:
		return &config.FieldError{Path: "self_correct.retries", Msg: fmt.Sprintf("%d: want 0 (off) to 5", c.SelfCorrect.Retries)}
	case c.SelfCorrect.Retries > 0 && c.SelfCorrect.MaxSamples < 1:
		return &config.FieldError{Path: "self_correct.max_samples", Msg: "must be >= 1 when retries > 0"}
	case c.Epochs < 1:
		return &config.FieldError{Path: "epochs", Msg: "must be >= 1"}
	case c.Mode != "sync" && c.Mode != "async":
		return &config.FieldError{Path: "mode", Msg: fmt.Sprintf("%q: allowed values: sync, async", c.Mode)}
	case c.MaxStaleness < 1 || c.MaxStaleness > maxStaleness:
		return &config.FieldError{Path: "max_staleness", Msg: fmt.Sprintf("%d: want 1..%d", c.MaxStaleness, maxStaleness)}
	case c.Mode != "async" && (c.MaxStaleness != 1 || c.Partial):
		return &config.FieldError{Path: "max_staleness", Msg: fmt.Sprintf("max_staleness %d, partial %v: rollouts are stale only with mode async (sync: leave 1 and false)", c.MaxStaleness, c.Partial)}
	case c.Partial && len(c.Rollout.Tools) > 0:
		return &config.FieldError{Path: "partial", Msg: "agentic episodes (rollout.tools) are generated whole: leave partial false"}
	case c.SegmentTokens != 0 && !c.Partial:
		return &config.FieldError{Path: "segment_tokens", Msg: "sizes the segments of partial generations: set partial: true too, or leave it 0"}
	case c.SegmentTokens < 0 || c.SegmentTokens > c.MaxNewTokens:
		return &config.FieldError{Path: "segment_tokens", Msg: fmt.Sprintf("%d: want 0 (ceil(max_new_tokens/(max_staleness+1))) to max_new_tokens (%d)", c.SegmentTokens, c.MaxNewTokens)}
	case !(c.MaxSeconds >= 0):
		return &config.FieldError{Path: "max_seconds", Msg: "must be >= 0"}
	case c.KeepLast < 1:
		return &config.FieldError{Path: "keep_last", Msg: "must be >= 1"}
	case c.EvalEvery < 0:
		return &config.FieldError{Path: "eval_every", Msg: "must be >= 0"}
	case c.Backtrack.Budget < 0 || c.Backtrack.LRFactor <= 0 || c.Backtrack.KLFactor <= 0:
		return &config.FieldError{Path: "backtrack", Msg: "budget >= 0, lr_factor > 0 and kl_factor > 0"}
	case c.HeartbeatTimeout.D() < time.Second:
		return &config.FieldError{Path: "heartbeat_timeout", Msg: "want at least 1s"}
	}
	return nil
}

// validateRollout checks the rollout, sampling, tools and agent settings together (they constrain
// each other).
func (c *RLConfig) validateRollout() error {
	if err := c.Rollout.Validate(); err != nil {
		return err
	}
	if err := c.Sampling.Validate(); err != nil {
		return &config.FieldError{Path: "sampling", Msg: err.Error()}
	}
	if len(c.Sampling.Stop) > 0 && (len(c.Rollout.Tools) > 0 || len(c.Eval.Tools) > 0) {
		return &config.FieldError{Path: "sampling.stop", Msg: "not supported with tools (rollout.tools, eval.tools): an episode's turns end at their tool calls"}
	}
	if err := c.Eval.validateTools(); err != nil {
		return err
	}
	if err := c.Eval.validateVerifiers(); err != nil {
		return err
	}
	if len(c.Eval.Verifiers) > 0 && (len(c.Rollout.Tools) > 0 || c.Rollout.Agent != nil) {
		return &config.FieldError{Path: "eval.verifiers", Msg: "score single completions: the evaluation of an agentic phase (rollout.tools, rollout.agent) plays episodes"}
	}
	if err := checkLookup("rollout.tools", c.Rollout.Tools, c.Data); err != nil {
		return err
	}
	if err := checkLookup("eval.tools", c.Eval.Tools, c.Data); err != nil {
		return err
	}
	if err := c.validateAgent(); err != nil {
		return err
	}
	if len(c.Rollout.Tools) > 0 && c.SelfCorrect.Retries > 0 {
		return &config.FieldError{Path: "self_correct.retries", Msg: "agentic episodes (rollout.tools) correct themselves inside the episode with the check tool: leave retries 0"}
	}
	return nil
}

// validateAgent names a bad rollout.agent field, or a setting an agent phase cannot honour.
func (c *RLConfig) validateAgent() error {
	a := c.Rollout.Agent
	if a == nil {
		return nil
	}
	bad := func(field, format string, args ...any) error {
		return &config.FieldError{Path: "rollout.agent" + field, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case len(a.Command) == 0 || a.Command[0] == "":
		return bad(".command", "required: the agent program and its arguments, e.g. [python3, agent.py]")
	case a.Timeout < 0 || (a.Timeout > 0 && a.Timeout.D() < time.Second) || a.Timeout.D() > time.Hour:
		return bad(".timeout", "%v: want 0 (default 1m) or 1s to 1h", a.Timeout.D())
	case a.Retries < 0 || a.Retries > 10:
		return bad(".retries", "%d: want 0 to 10", a.Retries)
	case a.MaxCalls < 0 || a.MaxCalls > 1024:
		return bad(".max_calls", "%d: want 0 (default %d) to 1024", a.MaxCalls, rolloutapi.DefaultAgentMaxCalls)
	case a.MemoryMiB < 0 || (a.MemoryMiB > 0 && a.MemoryMiB < 16) || a.MemoryMiB > 1<<16:
		return bad(".memory_mib", "%d: want 0 (default %d) or 16 to 65536", a.MemoryMiB, rolloutapi.DefaultAgentMemoryMiB)
	case a.AddressSpaceGiB < 0 || a.AddressSpaceGiB > 1024:
		return bad(".address_space_gib", "%d: want 0 (memory_mib) to 1024", a.AddressSpaceGiB)
	case len(c.Rollout.Tools) > 0:
		return bad("", "an agent brings its own tools: leave rollout.tools (the built-in episodes) unset")
	case c.SelfCorrect.Retries > 0:
		return &config.FieldError{Path: "self_correct.retries", Msg: "agent episodes are not regenerated with feedback: leave retries 0 (rollout.agent.retries retries failed agents)"}
	case len(c.Eval.Tools) > 0 || c.Eval.MaxTurns != 0:
		return &config.FieldError{Path: "eval.tools", Msg: "an agent phase is evaluated by its agent (rollout.agent): leave eval.tools and eval.max_turns unset"}
	case c.Eval.PassK > 1:
		return &config.FieldError{Path: "eval.pass_k", Msg: fmt.Sprintf("%d: an agent phase's evaluation plays each held-out prompt once, greedily: want 1", c.Eval.PassK)}
	}
	keys := make([]string, 0, len(a.Env))
	for k := range a.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the first bad name, whatever the map's order
	for _, k := range keys {
		switch {
		case !envName.MatchString(k):
			return bad(".env", "%q: not a variable name ([A-Za-z_][A-Za-z0-9_]*)", k)
		case k == "OPENAI_BASE_URL" || k == "OPENAI_API_KEY" || k == "OPENAI_MODEL":
			return bad(".env", "%s is the gateway's (the episode's endpoint): leave it unset", k)
		}
	}
	return nil
}

// envName is an environment variable's name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validateLoss checks the loss and that it fits the phase kind: ppo, with its critic, is its own kind.
func (c *RLConfig) validateLoss() error {
	if err := c.Loss.Validate(); err != nil {
		return &config.FieldError{Path: "loss", Msg: err.Error()}
	}
	ppo := c.kind == losscfg.AlgoPPO
	switch {
	case c.Loss.Algorithm == losscfg.AlgoPPO && !ppo:
		return &config.FieldError{Path: "loss.algorithm", Msg: "ppo needs a critic and is its own phase kind (kind: ppo); allowed here: grpo, dr_grpo, dapo, gspo, rloo, reinforce_pp, cispo"}
	case ppo && c.Loss.Algorithm != losscfg.AlgoPPO:
		return &config.FieldError{Path: "loss.algorithm", Msg: fmt.Sprintf("%q: a ppo phase trains ppo (leave loss.algorithm unset)", c.Loss.Algorithm)}
	case c.PPO != nil && !ppo:
		return &config.FieldError{Path: "ppo", Msg: "only the ppo phase kind has a critic to configure"}
	case ppo && c.PPO == nil:
		return &config.FieldError{Path: "ppo", Msg: "the ppo phase needs its settings (null is not allowed)"}
	case ppo && c.Loss.ValueCoef <= 0:
		return &config.FieldError{Path: "loss.value_coef", Msg: fmt.Sprintf("%g: ppo trains its critic with the value loss: want > 0 (default 0.5)", c.Loss.ValueCoef)}
	case ppo && c.DynamicSampling:
		return &config.FieldError{Path: "dynamic_sampling", Msg: "ppo's advantages come from its critic, not from groups: leave it off"}
	}
	if !ppo {
		return nil
	}
	if err := c.PPO.Validate(); err != nil {
		return err
	}
	return c.validateStepRewards()
}

// prmVerifier is the worker-side process-reward verifier (activities/reward's PRMVerifier; this
// layer cannot import it): the one whose verdicts hold step scores.
const prmVerifier = "prm"

// validateStepRewards checks ppo.step_rewards against the reward spec: it names a prm verifier's
// label, and the completions are the policy's own text (an episode's completion is its final
// answer, whose lines are no tokens of the rollout).
func (c *RLConfig) validateStepRewards() error {
	sr := c.PPO.StepRewards
	if sr == nil {
		return nil
	}
	if c.Rollout.Agent != nil || len(c.Rollout.Tools) > 0 {
		return &config.FieldError{Path: "ppo.step_rewards", Msg: "agentic episodes score their final answer, not lines of the policy's tokens: leave rollout.tools and rollout.agent unset"}
	}
	var labels []string
	for _, v := range c.Reward.Verifiers {
		if v.Name == prmVerifier {
			if v.Label() == sr.Verifier {
				return nil
			}
			labels = append(labels, v.Label())
		}
	}
	if len(labels) == 0 {
		return &config.FieldError{Path: "ppo.step_rewards.verifier", Msg: fmt.Sprintf("%q: reward.verifiers has no prm verifier to give step scores", sr.Verifier)}
	}
	return &config.FieldError{Path: "ppo.step_rewards.verifier", Msg: fmt.Sprintf("%q: allowed values (the prm verifiers' labels): %s", sr.Verifier, strings.Join(labels, ", "))}
}

func init() {
	for _, algo := range []string{losscfg.AlgoGRPO, losscfg.AlgoDAPO, losscfg.AlgoDrGRPO, losscfg.AlgoGSPO, losscfg.AlgoRLOO, losscfg.AlgoReinforcePP, losscfg.AlgoCISPO, losscfg.AlgoPPO} {
		algo := algo
		doc := fmt.Sprintf("RL with verifier rewards, %s loss and advantages; rollout, reward and trainer queues", algo)
		if algo == losscfg.AlgoCISPO {
			doc = "RL with verifier rewards, CISPO: the clipped IS weight (stop-gradient) times the log-prob, no token's gradient dropped; GRPO's group advantages; rollout, reward and trainer queues"
		}
		if algo == losscfg.AlgoPPO {
			doc = "RL with verifier rewards, PPO: a value-head critic on the policy's trunk, GAE(γ, λ) advantages, clipped value loss, entropy bonus; rollout, reward and trainer queues"
		}
		RegisterPhase(PhaseKind{Kind: algo, WorkflowName: "RL-" + algo, Workflow: RL,
			Doc:       doc,
			NewConfig: func() PhaseConfig { return defaultRLConfig(algo) }})
	}
}

// WorkerVerifiers are the verifiers the reward workers add to verify.Builtins: "task", "code", "critic" and "prm"
// (activities/reward) and "critic" (workers, which own the engine it needs). This layer cannot build
// them, so a reward spec naming one is checked here for everything else (names, labels, weights, that
// params is an object) and its params when the reward worker composes the spec. A test in workers
// holds this list to the worker's registry.
var WorkerVerifiers = []string{"code", "critic", "prm", "task"}

// rewardRegistry is verify.Builtins plus WorkerVerifiers as placeholders that accept any params and
// are never run.
func rewardRegistry() *verify.Registry {
	r := verify.Builtins()
	for _, name := range WorkerVerifiers {
		_ = r.Register(name, workerSideVerifier(name)) // cannot clash: none is a built-in name (tested)
	}
	return r
}

func workerSideVerifier(name string) verify.Factory {
	return func(json.RawMessage) (verify.Verifier, error) {
		return verify.Func(func(context.Context, verify.Sample) (verify.Verdict, error) {
			return verify.Verdict{}, fmt.Errorf("verify: %q runs on the reward worker, not in the workflow", name)
		}), nil
	}
}
