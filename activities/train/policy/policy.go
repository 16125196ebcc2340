package policy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/gomlx/gomlx/core/tensors"
	"go.temporal.io/sdk/activity"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/contract"
	"github.com/temperml/temper/algorithms/advantage"
	"github.com/temperml/temper/algorithms/loss"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/tokenize"
)

// Activities are the policy activities; they share the trainer's dependencies (store client,
// engine factory) and kernel (chunk runner, engine loaders, data readers) with the other families.
type Activities struct{ *train.Activities }

// Register registers the policy activities under their contract names on the trainer queue's worker.
func Register(r train.Registrar, deps *train.Activities) {
	a := &Activities{deps}
	r.RegisterActivityWithOptions(a.PolicyStep, activity.RegisterOptions{Name: contract.PolicyStepName})
}

// advantages computes per-rollout advantages for the algorithm from rewards grouped by prompt.
func advantages(algo string, rs []rollout.Rollout, rewards []float64) ([]float64, error) {
	groups := rollout.Groups(rs)
	gr := make([][]float64, len(groups))
	for i, g := range groups {
		for _, j := range g {
			gr[i] = append(gr[i], rewards[j])
		}
	}
	out := make([]float64, len(rs))
	var adv [][]float64
	var err error
	switch algo {
	case loss.AlgoDrGRPO:
		adv, err = advantage.DrGRPO(gr)
	case loss.AlgoRLOO:
		adv, err = advantage.RLOO(gr)
	case loss.AlgoReinforcePP:
		mask := make([][]bool, len(rs))
		for i := range mask {
			mask[i] = []bool{true}
		}
		tok, err := advantage.ReinforcePP(rewards, mask, nil, advantage.DefaultReinforcePPConfig())
		if err != nil {
			return nil, err
		}
		for i := range out {
			out[i] = tok[i][0]
		}
		return out, nil
	default: // grpo, dapo, gspo
		adv, err = advantage.GRPO(gr, advantage.DefaultGRPOConfig())
	}
	if err != nil {
		return nil, err
	}
	for i, g := range groups {
		for k, j := range g {
			out[j] = adv[i][k]
		}
	}
	return out, nil
}

// policyRows are the host inputs of objective.Policy for a set of rollouts.
type policyRows struct {
	tokens, targets, positions [][]int
	valid                      [][]bool
	mask, behaviour            [][]float32
	adv                        []float32
	seq                        int
	// cols[r] are row r's completion columns (the t whose target is a completion token), −1 past
	// them; window is their padded count (a multiple of 4, the longest completion's).
	cols   [][]int
	window int
}

// completionWindow is the window of a policy step's rows (objective.PolicyOptions.Window): 0, the whole
// row, unless the completions fit in fewer columns.
func (p policyRows) completionWindow() int {
	if p.window >= p.seq {
		return 0
	}
	return p.window
}

// colsTensor is cols as the objective's [rows, window] int32 input.
func (p policyRows) colsTensor() *tensors.Tensor {
	flat := make([]int32, 0, len(p.cols)*p.window)
	for _, row := range p.cols {
		for j := range p.window {
			c := -1
			if j < len(row) {
				c = row[j]
			}
			flat = append(flat, int32(c))
		}
	}
	return tensors.FromFlatDataAndDimensions(flat, len(p.cols), p.window)
}

// rewardStats sets reward_mean, reward_std (population) and response_length (mean completion
// tokens) over all rollouts.
func rewardStats(metrics map[string]float64, rs []rollout.Rollout, rewards []float64) {
	var rsum, rsq, lsum float64
	for i, r := range rewards {
		rsum += r
		rsq += r * r
		lsum += float64(len(rs[i].Tokens))
	}
	n := float64(len(rs))
	metrics["reward_mean"] = rsum / n
	metrics["reward_std"] = math.Sqrt(math.Max(0, rsq/n-(rsum/n)*(rsum/n)))
	metrics["response_length"] = lsum / n
	episodeStats(metrics, rs)
}

// episodeStats sets, when rs are agentic episodes, the per-iteration episode metrics: turns per
// episode (episode_turns), tool calls and failed tool calls per episode (episode_tool_calls,
// episode_tool_errors), the share of episodes ending with an answer (episode_answered), the share
// that called check (episode_checked) and, of those, the share whose last check passed
// (episode_check_passed).
func episodeStats(metrics map[string]float64, rs []rollout.Rollout) {
	var n, turns, calls, errs, answered, checked, passed float64
	for _, r := range rs {
		if r.Ep == nil {
			continue
		}
		n++
		turns += float64(r.Ep.Turns)
		calls += float64(r.Ep.ToolCalls)
		errs += float64(r.Ep.ToolErrors)
		if r.Ep.End == "answer" {
			answered++
		}
		if r.Ep.Checked {
			checked++
			if r.Ep.CheckPass {
				passed++
			}
		}
	}
	if n == 0 {
		return
	}
	metrics["episode_turns"], metrics["episode_tool_calls"], metrics["episode_tool_errors"] = turns/n, calls/n, errs/n
	metrics["episode_answered"], metrics["episode_checked"] = answered/n, checked/n
	if checked > 0 {
		metrics["episode_check_passed"] = passed / checked
	}
}

// summary is an episode's counts without its transcript (what a streamed step keeps in memory).
func summary(ep *rollout.Episode) *rollout.Episode {
	if ep == nil {
		return nil
	}
	s := *ep
	s.Transcript = ""
	return &s
}

// referenceLogProbs fills ref[c] with the reference model's log-probs of rows[c] (the KL term's
// π_ref), loading the reference checkpoint once for all chunks.
func (a *Activities) referenceLogProbs(ctx context.Context, uri string, rows []policyRows, ref [][][]float32) error {
	rm, err := a.Load(ctx, uri, train.LoadOptions{})
	if err != nil {
		return err
	}
	refEng := rm.Engine
	defer refEng.Close()
	for c := range rows {
		if ref[c], err = refEng.LogProbs(rows[c].batch()); err != nil {
			return fmt.Errorf("reference log-probs of %s: %w", uri, err)
		}
	}
	return nil
}

// inputs are the objective inputs every policy objective starts with: tokens, targets, positions,
// valid, mask, old log-probs, behaviour log-probs, reference log-probs.
func (p policyRows) inputs(old, ref [][]float32) []*tensors.Tensor {
	return []*tensors.Tensor{train.I32(p.tokens), train.I32(p.targets), train.I32(p.positions), train.Bools(p.valid),
		train.F32(p.mask), train.F32(old), train.F32(p.behaviour), train.F32(ref)}
}

func buildPolicyRows(rs []rollout.Rollout, adv []float64, idx []int) policyRows {
	longest := 2
	for _, i := range idx {
		longest = max(longest, len(rs[i].PromptTokens)+len(rs[i].Tokens))
	}
	seq := SeqBucket(longest - 1)
	p := policyRows{seq: seq}
	for _, i := range idx {
		r := rs[i]
		full := append(append([]int{}, r.PromptTokens...), r.Tokens...)
		tok, tgt, pos := make([]int, seq), make([]int, seq), make([]int, seq)
		valid, mask, beh := make([]bool, seq), make([]float32, seq), make([]float32, seq)
		var cols []int
		for t := 0; t < seq; t++ {
			pos[t] = t
			tok[t], tgt[t] = tokenize.BytePAD, tokenize.BytePAD
			if t+1 < len(full) {
				tok[t], tgt[t], valid[t] = full[t], full[t+1], true
				// Only the policy's own tokens are trained on: not the prompt, not an episode's tool
				// results (their log-prob is not the policy's).
				if c := t + 1 - len(r.PromptTokens); c >= 0 {
					cols = append(cols, t)
					if r.Trained(c) {
						mask[t], beh[t] = 1, r.LogProbs[c]
					}
				}
			}
		}
		p.cols = append(p.cols, cols)
		p.window = max(p.window, (len(cols)+3)/4*4)
		p.tokens, p.targets, p.positions = append(p.tokens, tok), append(p.targets, tgt), append(p.positions, pos)
		p.valid, p.mask, p.behaviour = append(p.valid, valid), append(p.mask, mask), append(p.behaviour, beh)
		p.adv = append(p.adv, float32(adv[i]))
	}
	return p
}

// SeqBucket is the padded length of n positions: the smallest of 8, 10, 12, 14, 16, 20, 24, 28, 32,
// 40, … (four buckets an octave) that holds n. Buckets bound recompilation (one compiled step a
// bucket; an RL phase's rows keep the same longest length from one iteration to the next) while
// padding at most a quarter of a row: the policy step's time is proportional to the padded length,
// and powers of two alone padded an add2 rollout's 10 positions to 16.
func SeqBucket(n int) int {
	for b := 8; ; b *= 2 {
		for _, q := range []int{b, b + b/4, b + b/2, b + 3*b/4} {
			if n <= q {
				return q
			}
		}
	}
}

func (p policyRows) batch() train.Batch {
	lm := make([][]float32, len(p.mask))
	copy(lm, p.mask)
	return train.Batch{Tokens: p.tokens, Targets: p.targets, LossMask: lm, Positions: p.positions, Valid: p.valid}
}

// PolicyStep trains one RL iteration: advantages from the rewards, old log-probs recomputed by the
// policy itself, reference log-probs (when KL is on), Epochs passes of the policy objective, and
// commits version Version+1. Idempotent: a committed version is returned as is.
func (a *Activities) PolicyStep(ctx context.Context, in contract.PolicyStepInput) (contract.PolicyStepOutput, error) {
	next := in.Version + 1
	if ref, err := a.Ckpt.Lookup(ctx, in.Store, in.Run, in.Phase, int64(next)); err == nil {
		ck, err := a.Ckpt.Read(ctx, ref.URI)
		if err != nil {
			return contract.PolicyStepOutput{}, err
		}
		st, err := ck.ReadState(ctx)
		if err != nil {
			return contract.PolicyStepOutput{}, err
		}
		return contract.PolicyStepOutput{Checkpoint: ref.URI, Version: next, Metrics: st.Scalars, Resumed: true,
			NonFinite: st.Scalars["non_finite"] > 0}, nil
	} else if !errors.Is(err, ckpt.ErrNotExist) {
		return contract.PolicyStepOutput{}, err
	}
	if err := in.Loss.Validate(); err != nil {
		return contract.PolicyStepOutput{}, train.BadInput(fmt.Errorf("train: policy step %s/%s: %w", in.Run, in.Phase, err))
	}
	if in.Loss.Algorithm == loss.AlgoPPO { // token-level advantages from a critic: ppo.go
		return a.ppoStep(ctx, in)
	}
	if len(in.Shards) > 0 && in.Minibatch > 0 { // by reference, in minibatches: read as it trains (stream.go)
		return a.streamedStep(ctx, in, next)
	}
	readStart := time.Now()
	rs, err := a.scoredRollouts(ctx, &in)
	if err != nil {
		return contract.PolicyStepOutput{}, err
	}
	if len(rs) != len(in.Rewards) {
		return contract.PolicyStepOutput{}, train.BadInput(fmt.Errorf("train: policy step %s: %d rewards for %d rollouts", in.Rollouts, len(in.Rewards), len(rs)))
	}
	metrics := map[string]float64{"seconds_read": time.Since(readStart).Seconds()}
	if activity.IsActivity(ctx) { // how long the step waited for a trainer to take it
		info := activity.GetInfo(ctx)
		metrics["seconds_queued"] = info.StartedTime.Sub(info.ScheduledTime).Seconds()
	}
	adv, err := advantages(in.Loss.Algorithm, rs, in.Rewards)
	if err != nil {
		return contract.PolicyStepOutput{}, train.BadInput(err)
	}
	if in.InjectNaN {
		for i := range adv {
			adv[i] = math.NaN()
		}
	}
	// Rows: every rollout, or (dynamic sampling) those of groups whose rewards differ.
	idx, dropped := keptRows(rs, in.Rewards, in.DynamicSampling)
	metrics["groups_dropped"] = float64(dropped)
	rewardStats(metrics, rs, in.Rewards)
	rs, adv, idx = segmentRows(rs, adv, idx) // an agent's further segments: rows of their own

	loadStart := time.Now()
	pol, err := a.Load(ctx, in.Policy, train.LoadOptions{Optim: in.Optim, Optimizer: !in.FreshOptimizer})
	if err != nil {
		return contract.PolicyStepOutput{}, err
	}
	eng, cfg := pol.Engine, pol.Config
	defer eng.Close()
	metrics["seconds_load"] = time.Since(loadStart).Seconds()
	// Loading and the log-probs passes come before the first optimizer step's heartbeat; on a loaded
	// 2-core machine they once took past the 30 s heartbeat timeout, and the attempt was retried.
	beat := func() { activity.RecordHeartbeat(ctx, contract.Progress{}) }
	beat()
	nonFinite := false
	if len(idx) > 0 {
		mb := in.Minibatch
		if mb <= 0 || mb > len(idx) {
			mb = len(idx)
		}
		var chunks [][]int
		for lo := 0; lo < len(idx); lo += mb {
			chunks = append(chunks, idx[lo:min(lo+mb, len(idx))])
		}
		// Old and reference log-probs, once per iteration, before any update. One epoch of one
		// minibatch is on-policy: π_old is the policy being stepped, so the objective takes it from
		// its own forward pass (objective.PolicyOptions.OnPolicy) and the separate pass is skipped, unless a
		// KL term needs it as its reference.
		separateRef := in.Reference != "" && in.Reference != in.Policy
		onPolicy := max(1, in.Epochs) == 1 && len(chunks) == 1 && (in.Loss.KLBeta == 0 || separateRef)
		rows := make([]policyRows, len(chunks))
		old := make([][][]float32, len(chunks))
		ref := make([][][]float32, len(chunks))
		for c, ch := range chunks {
			rows[c] = buildPolicyRows(rs, adv, ch)
			if onPolicy {
				old[c] = train.Zeros(len(ch), rows[c].seq) // ignored by the on-policy objective
			} else if old[c], err = eng.LogProbs(rows[c].batch()); err != nil {
				return contract.PolicyStepOutput{}, fmt.Errorf("train: policy step old log-probs: %w", err)
			}
			ref[c] = old[c]
			beat()
		}
		if in.Loss.KLBeta > 0 && separateRef {
			if err := a.referenceLogProbs(ctx, in.Reference, rows, ref); err != nil {
				return contract.PolicyStepOutput{}, fmt.Errorf("train: policy step: %w", err)
			}
			beat()
		}
		// Each chunk's objective reads its completion window only (objective.PolicyOptions.Window).
		objs := make([]objective.Objective, len(chunks))
		for c := range chunks {
			objs[c] = objective.PolicyWith(in.Loss, objective.PolicyOptions{OnPolicy: onPolicy, Window: rows[c].completionWindow()})
		}
		inputs := func(c int) ([]*tensors.Tensor, error) {
			ins := append(rows[c].inputs(old[c], ref[c]), tensors.FromFlatDataAndDimensions(rows[c].adv, len(rows[c].adv)))
			if rows[c].completionWindow() > 0 {
				ins = append(ins, rows[c].colsTensor())
			}
			return ins, nil
		}
		if nonFinite, err = optimizeEpochsWith(ctx, eng, func(c int) objective.Objective { return objs[c] }, inputs, len(chunks), in, metrics); err != nil {
			return contract.PolicyStepOutput{}, err
		}
	}
	return a.commitPolicy(ctx, in, next, cfg, metrics, nonFinite, func(w *ckpt.Writer, st ckpt.State) error {
		return train.WriteModel(ctx, w, pol, st, true)
	})
}

// commitPolicy commits policy version next with the step's metrics (non-finite values dropped,
// non_finite and lr added) and returns the step's output; write stores the weights.
func (a *Activities) commitPolicy(ctx context.Context, in contract.PolicyStepInput, next int, cfg model.Config, metrics map[string]float64,
	nonFinite bool, write func(*ckpt.Writer, ckpt.State) error) (contract.PolicyStepOutput, error) {
	if nonFinite {
		metrics["non_finite"] = 1
	}
	finiteOnly(metrics)
	metrics["lr"] = train.PolicyLR(in)
	commitStart := time.Now()
	st := ckpt.State{Step: int64(next), PolicyVersion: int64(next), ConfigHash: train.ConfigHash(cfg), Scalars: metrics}
	// Logged before the commit: a retry after a crash in between rewrites the same iteration.
	if err := a.Ckpt.AppendMetrics(ctx, in.Store, in.Run, in.Phase, []ckpt.MetricsRecord{
		{Kind: ckpt.RecordTrain, Step: in.Iteration + 1, Time: train.Now(), Metrics: metrics}}); err != nil {
		return contract.PolicyStepOutput{}, fmt.Errorf("train: %s step %s/%s metrics log: %w", in.Loss.Algorithm, in.Run, in.Phase, err)
	}
	out, err := a.Ckpt.Save(ctx, in.Store, in.Run, in.Phase, int64(next), func(w *ckpt.Writer) error { return write(w, st) })
	if err != nil {
		return contract.PolicyStepOutput{}, fmt.Errorf("train: %s step %s/%s commit v%d: %w", in.Loss.Algorithm, in.Run, in.Phase, next, err)
	}
	// The commit's own time reaches the workflow, not the committed checkpoint's scalars.
	metrics["seconds_commit"] = time.Since(commitStart).Seconds()
	return contract.PolicyStepOutput{Checkpoint: out.URI, Version: next, NonFinite: nonFinite, Metrics: metrics}, nil
}

// finiteOnly drops NaN and ±Inf metrics: Temporal payloads are JSON, which has no such numbers (the
// non_finite flag says what happened).
func finiteOnly(m map[string]float64) {
	for k, v := range m {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			delete(m, k)
		}
	}
}

// optimizeEpochs runs in.Epochs passes of one optimizer step per minibatch (inputs(c) builds
// minibatch c of n), heartbeating each step, and adds to metrics the objective's metrics averaged
// over the steps, optimizer_steps and train_tokens_per_s (the objective's "tokens" per second of
// optimization). nonFinite reports a NaN/Inf loss or gradient norm in any step.
func optimizeEpochs(ctx context.Context, eng objectiveStepper, obj objective.Objective, inputs func(c int) ([]*tensors.Tensor, error), n int,
	in contract.PolicyStepInput, metrics map[string]float64) (nonFinite bool, err error) {
	return optimizeEpochsWith(ctx, eng, func(int) objective.Objective { return obj }, inputs, n, in, metrics)
}

// optimizeEpochsWith is optimizeEpochs with minibatch c's objective obj(c).
func optimizeEpochsWith(ctx context.Context, eng objectiveStepper, obj func(c int) objective.Objective, inputs func(c int) ([]*tensors.Tensor, error), n int,
	in contract.PolicyStepInput, metrics map[string]float64) (nonFinite bool, err error) {
	start := time.Now()
	epochs := max(1, in.Epochs)
	steps, total := 0, epochs*n
	sums := map[string]float64{}
	for e := 0; e < epochs; e++ {
		for c := 0; c < n; c++ {
			ins, err := inputs(c) // a streamed step reads the minibatch from the store
			if err != nil {
				return false, fmt.Errorf("train: %s step %s/%s v%d: %w", in.Loss.Algorithm, in.Run, in.Phase, in.Version, err)
			}
			m, err := eng.StepObjective(obj(c), ins, float32(train.PolicyLR(in)))
			if err != nil {
				return false, fmt.Errorf("train: %s step %s/%s v%d: %w", in.Loss.Algorithm, in.Run, in.Phase, in.Version, err)
			}
			if l, g := float64(m["loss"]), float64(m["grad_norm"]); math.IsNaN(l) || math.IsInf(l, 0) || math.IsNaN(g) || math.IsInf(g, 0) {
				nonFinite = true
			}
			for k, v := range m {
				sums[k] += float64(v)
			}
			steps++
			activity.RecordHeartbeat(ctx, contract.Progress{Step: steps, Total: total})
		}
	}
	for k, v := range sums {
		metrics[k] = v / float64(steps)
	}
	metrics["optimizer_steps"] = float64(steps)
	d := time.Since(start).Seconds()
	metrics["seconds_optimize"] = d
	if d > 0 {
		metrics["train_tokens_per_s"] = sums["tokens"] / d // completion tokens trained, all epochs
	}
	return nonFinite, nil
}

// objectiveStepper is the part of an engine that optimizeEpochs uses.
type objectiveStepper interface {
	StepObjective(obj objective.Objective, inputs []*tensors.Tensor, lr float32) (map[string]float32, error)
}

// ValueReader is an engine that can read its model's value head at every position: PPO's critic
// (V(s_t) before an iteration's updates, for GAE). PPO asks an engine for it by type assertion, so
// engines without a value head (test doubles, adapters) still satisfy train.Engine; workers' engine
// implements it.
type ValueReader interface {
	// Values returns the value head's output at every position of b ([rows][seq]; Targets and
	// LossMask are ignored). The model must have a value head.
	Values(b train.Batch) ([][]float32, error)
}
