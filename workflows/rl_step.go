package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/reward/rewardapi"
	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/activities/train/trainapi"
)

// rlRollouts is an iteration's scored rollouts: what the policy step reads, what the run sums up,
// and the failed samples self-correction regenerates.
type rlRollouts struct {
	version    int       // the policy version that generated them
	rollouts   string    // inline: the one rollouts object (sharded: shards)
	rewards    []float64 // inline: per sample, in file order (sharded: in the store beside each shard)
	shards     []trainapi.ScoredShard
	metrics    rewardapi.Metrics // the iteration's reward summary
	tokensPerS float64
	// The first failed samples (at most self_correct.max_samples) and their feedback; index is in
	// the file order of src, or of srcShards read as one.
	src       string
	srcShards []string
	failed    []int
	feedback  []string
	// Agent episodes: groups dropped (not in the rollouts) and attempts failed.
	agentDropped, agentFailures int
}

// nextRollouts waits for iteration st.Iter's rollouts and, in async mode, starts generating the next
// iteration's with the current policy, to run beside this one's step (not when this is the last
// iteration, or its time budget is already spent).
func (r *rlRun) nextRollouts(iterStart time.Time) error {
	st := &r.st
	if err := r.src.next(r); err != nil {
		return r.fail(fmt.Sprintf("generate iteration %d", st.Iter), err)
	}
	st.WaitGenerate += r.since(iterStart)
	if r.async && st.Iter+1 < r.cfg.Iterations && !(r.cfg.MaxSeconds > 0 && st.Seconds+r.since(iterStart) >= r.cfg.MaxSeconds) {
		r.src.ahead(r)
	}
	return nil
}

// score waits for the iteration's verdicts and, with self_correct, regenerates the failed samples.
func (r *rlRun) score() (rlRollouts, error) {
	st := &r.st
	scoreStart := workflow.Now(r.ctx)
	b, err := r.src.score(r)
	if err != nil {
		return b, r.fail(fmt.Sprintf("score iteration %d", st.Iter), err)
	}
	st.WaitScore += r.since(scoreStart)
	st.RolloutTokS += b.tokensPerS
	st.AgentDropped += b.agentDropped
	st.AgentFailures += b.agentFailures
	if r.cfg.SelfCorrect.Retries > 0 {
		if err := r.selfCorrect(b.src, b.srcShards, b.failed, b.feedback); err != nil {
			return b, r.fail(fmt.Sprintf("iteration %d", st.Iter), err)
		}
	}
	return b, nil
}

// selfCorrect regenerates the failed samples idx (file order of src, or of the shards srcShards read
// as one) with their feedback fb, for up to self_correct.retries rounds, and keeps the corrections
// that pass as data.
func (r *rlRun) selfCorrect(src string, srcShards []string, idx []int, fb []string) error {
	st, in, cfg := &r.st, r.in, r.cfg
	for round := 1; round <= cfg.SelfCorrect.Retries && len(idx) > 0; round++ {
		var rg rolloutapi.GenerateOutput
		if err := workflow.ExecuteActivity(r.rolloutCtx, rolloutapi.GenerateName, rolloutapi.GenerateInput{
			Store: in.Store, Run: in.RunID, Phase: st.Dir, Checkpoint: st.Policy, PolicyVersion: st.Version, Iteration: st.Iter,
			Data: cfg.Data, Seed: r.seed, Group: 1, MaxNewTokens: cfg.MaxNewTokens, Temperature: cfg.Temperature, Sampling: cfg.Sampling.OrNil(),
			RetryOf: src, RetryOfShards: srcShards, RetryIndex: idx, RetryFeedback: fb, RetryResample: cfg.SelfCorrect.Resample, Tag: fmt.Sprintf("retry%d", round),
		}).Get(r.ctx, &rg); err != nil {
			return fmt.Errorf("self-correction round %d: %w", round, err)
		}
		var rsc rewardapi.ScoreOutput
		if err := workflow.ExecuteActivity(r.rewardCtx, rewardapi.ScoreName, rewardapi.ScoreInput{Rollouts: rg.Rollouts, Spec: cfg.Reward}).Get(r.ctx, &rsc); err != nil {
			return fmt.Errorf("self-correction round %d: score: %w", round, err)
		}
		var passed []int
		for k, v := range rsc.Verdicts {
			if v.Pass {
				passed = append(passed, k)
			}
		}
		st.CorrTried += len(idx)
		st.CorrPassed += len(passed)
		if len(passed) > 0 {
			if err := workflow.ExecuteActivity(r.rolloutCtx, rolloutapi.KeepName, rolloutapi.KeepInput{
				Store: in.Store, Run: in.RunID, Phase: st.Dir, Iteration: st.Iter, Round: round, Rollouts: rg.Rollouts, Index: passed,
			}).Get(r.ctx, nil); err != nil {
				return fmt.Errorf("self-correction round %d: keep: %w", round, err)
			}
		}
		src, srcShards = rg.Rollouts, nil
		idx, fb = failedOf(rsc.Verdicts, len(rsc.Verdicts))
	}
	return nil
}

// failedOf returns the first failed samples of verdicts (file order, at most limit) and their
// feedback; a sample the verifier could not judge (Error) is not retried.
func failedOf(vs []rewardapi.ItemVerdict, limit int) (idx []int, fb []string) {
	for i, v := range vs {
		if !v.Pass && v.Error == "" && len(idx) < limit {
			idx, fb = append(idx, i), append(fb, v.Feedback)
		}
	}
	return idx, fb
}

// step trains the policy on the iteration's rollouts (its LR and KL scaled by the back-tracks so far;
// stale async rollouts corrected by truncated importance sampling unless loss.correction chose a
// correction; online_dpo: a pairwise loss instead, rl_dpo.go) and sums up the iteration.
func (r *rlRun) step(b rlRollouts, iterStart time.Time) (trainapi.PolicyStepOutput, error) {
	st := &r.st
	var name string
	var input any
	if r.cfg.Preference != nil {
		name, input = trainapi.OnlineDPOStepName, r.dpoStepInput(b)
	} else {
		name, input = trainapi.PolicyStepName, r.policyStepInput(b)
	}
	var step trainapi.PolicyStepOutput
	trainStart := workflow.Now(r.ctx)
	if err := workflow.ExecuteActivity(r.trainCtx, name, input).Get(r.ctx, &step); err != nil {
		return step, r.fail(fmt.Sprintf("train iteration %d", st.Iter), err)
	}
	st.Iter++
	st.WaitTrain += r.since(trainStart)
	st.TrainTokS += step.Metrics["train_tokens_per_s"]
	st.StepLoad += step.Metrics["seconds_load"] + step.Metrics["seconds_read"]
	st.StepOptimize += step.Metrics["seconds_optimize"]
	st.StepCommit += step.Metrics["seconds_commit"]
	st.StepQueued += step.Metrics["seconds_queued"]
	st.Seconds += r.since(iterStart)
	st.RewardSum += b.metrics.MeanScore
	st.LastReward = b.metrics.MeanScore
	st.PointReward += b.metrics.MeanScore
	st.PointIters++
	if r.cfg.Preference != nil {
		st.addPairs(step.Metrics)
	}
	return step, nil
}

// policyStepInput is the policy-gradient step of iteration st.Iter.
func (r *rlRun) policyStepInput(b rlRollouts) trainapi.PolicyStepInput {
	st, in, cfg := &r.st, r.in, r.cfg
	lc := cfg.Loss
	lc.KLBeta *= st.KLScale
	if r.async && b.version != st.Version && r.autoTIS(lc) {
		lc.TISThreshold = 2 // stale rollouts: correct with truncated importance sampling
	}
	var ppo *trainapi.PPOConfig // ppo kind only; nil keeps other kinds' activity input unchanged
	if cfg.PPO != nil {
		p := *cfg.PPO
		p.KLCoef *= st.KLScale
		if p.Seed == 0 {
			p.Seed = r.seed
		}
		ppo = &p
	}
	return trainapi.PolicyStepInput{
		Store: in.Store, Run: in.RunID, Phase: st.Dir, Policy: st.Policy, Reference: st.Reference, Version: st.Version,
		Rollouts: b.rollouts, Rewards: b.rewards, Shards: b.shards, Loss: lc, Optim: cfg.Optimizer, Iterations: cfg.Iterations, LRScale: st.LRScale,
		Epochs: cfg.Epochs, Minibatch: cfg.Minibatch, DynamicSampling: cfg.DynamicSampling, FreshOptimizer: st.FreshOptimizer,
		InjectNaN: cfg.InjectNaNAt == st.Iter+1 && len(st.Branches) == 0, PPO: ppo, Iteration: st.Iter,
	}
}

// evaluate measures a checkpoint on the held-out data (an agent phase: by its agent, on the
// rollout queue).
func (r *rlRun) evaluate(uri string) (map[string]float64, error) {
	st, in, cfg := &r.st, r.in, r.cfg
	var out trainapi.EvalOutput
	ev := trainapi.EvalInput{
		Store: in.Store, Checkpoint: uri, Data: cfg.Data, Examples: cfg.Eval.Examples, MaxNewTokens: cfg.evalMaxNewTokens(),
		PassK: cfg.Eval.PassK, Temperature: cfg.Eval.Temperature, Seed: r.seed, Sampling: cfg.Sampling.OrNil(),
		Log:   &trainapi.LogAt{Run: in.RunID, Phase: st.Dir, Step: st.Iter},
		Tools: cfg.evalTools(), MaxTurns: cfg.evalMaxTurns(), Verifiers: cfg.Eval.Verifiers,
	}
	if cfg.Rollout.Agent != nil {
		err := workflow.ExecuteActivity(r.rolloutCtx, rolloutapi.AgentEvalName, rolloutapi.AgentEvalInput{Eval: ev, Agent: *cfg.Rollout.Agent,
			PolicyVersion: st.Version}).Get(r.ctx, &out)
		return out.Metrics, err
	}
	err := workflow.ExecuteActivity(r.trainCtx, trainapi.EvaluateName, ev).Get(r.ctx, &out)
	return out.Metrics, err
}

// judge evaluates the new policy, adds a point to the curve, and keeps the best version (back-
// tracking's target); it names a fall beyond backtrack.tolerance below the best.
func (r *rlRun) judge(memo map[string]any) (regression string, err error) {
	st, cfg := &r.st, r.cfg
	evalStart := workflow.Now(r.ctx)
	m, err := r.evaluate(st.Policy)
	st.WaitEval += r.since(evalStart)
	if err != nil {
		return "", r.fail(fmt.Sprintf("evaluate iteration %d", st.Iter), err)
	}
	st.Last = m
	score := m["heldout_exact_match"]
	st.Curve = append(st.Curve, CurvePoint{Seconds: st.Seconds, Step: st.Iter, ExactMatch: score,
		RewardMean: st.PointReward / float64(max(1, st.PointIters))})
	st.PointReward, st.PointIters = 0, 0
	memo["heldout_exact_match"] = score
	if cfg.InjectRegressionAt == st.Iter && len(st.Branches) == 0 {
		score = st.GoodScore - cfg.Backtrack.Tolerance - 1
	}
	if score < st.GoodScore-cfg.Backtrack.Tolerance {
		return fmt.Sprintf("held-out exact match fell from %.3f to %.3f at iteration %d", st.GoodScore, score, st.Iter), nil
	}
	if score >= st.GoodScore {
		st.Good, st.GoodVersion, st.GoodScore = st.Policy, st.Version, score
	}
	return "", nil
}

// retain prunes old versions of the current branch; the last good checkpoint (back-tracking's
// target) is marked best and kept. An overlapped retain runs beside the next step, which reads this
// version and commits the next: keeping two, it never deletes what that step or the generation
// beside it reads. The last one (and one before continue-as-new) runs alone and keeps keep_last.
func (r *rlRun) retain(last bool) error {
	if !r.retains() {
		return nil
	}
	st := &r.st
	best := ""
	if st.Good != r.in.From {
		best = st.Good
	}
	retainStart := workflow.Now(r.ctx)
	if err := r.awaitRetain(); err != nil {
		return err
	}
	keep, inline := r.cfg.KeepLast, !r.overlap || last || workflow.GetInfo(r.ctx).GetContinueAsNewSuggested()
	if !inline {
		keep = max(keep, 2)
	}
	f := workflow.ExecuteActivity(r.retainCtx, trainapi.RetainName, trainapi.RetainInput{
		Store: r.in.Store, Run: r.in.RunID, Phase: st.Dir, KeepLast: keep, Best: best,
	})
	if inline {
		if err := f.Get(r.ctx, nil); err != nil {
			return r.fail("retain", err)
		}
	} else {
		r.retainFut = f
	}
	st.WaitRetain += r.since(retainStart)
	return nil
}

// awaitRetain waits for the retain running beside the iteration, if any.
func (r *rlRun) awaitRetain() error {
	if r.retainFut == nil {
		return nil
	}
	f := r.retainFut
	r.retainFut = nil
	if err := f.Get(r.ctx, nil); err != nil {
		return r.fail("retain", err)
	}
	return nil
}
