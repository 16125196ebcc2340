package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	reward "github.com/temperml/temper/activities/reward/contract"
	rollout "github.com/temperml/temper/activities/rollout/contract"
	train "github.com/temperml/temper/activities/train/contract"
	"github.com/temperml/temper/internal/config"
)

// Branch records one back-track (visible as a marker in the history and in the memo).
type Branch struct {
	Iteration   int     `json:"iteration"`
	Reason      string  `json:"reason"`
	FromVersion int     `json:"from_version"`
	ToVersion   int     `json:"to_version"`
	Checkpoint  string  `json:"checkpoint"`
	LRScale     float64 `json:"lr_scale"`
	KLScale     float64 `json:"kl_scale"`
}

// errInPlace tells the loop to go on in this workflow: the history predates branch child workflows.
var errInPlace = errors.New("rl: back-track in place")

// RLState is the RL loop's state; it travels in PhaseInput.RL across continue-as-new.
type RLState struct {
	Iter           int                     `json:"iter"`
	Version        int                     `json:"version"`
	Policy         string                  `json:"policy"`
	Reference      string                  `json:"reference"`
	Dir            string                  `json:"dir"`  // checkpoint phase directory of the current branch
	Root           string                  `json:"root"` // workflow ID of the phase's first execution; branches are Root.b1, Root.b2, ...
	LRScale        float64                 `json:"lr_scale"`
	KLScale        float64                 `json:"kl_scale"`
	FreshOptimizer bool                    `json:"fresh_optimizer"`
	Good           string                  `json:"good"`
	GoodVersion    int                     `json:"good_version"`
	GoodScore      float64                 `json:"good_score"`
	Branches       []Branch                `json:"branches,omitempty"`
	Before         map[string]float64      `json:"before,omitempty"`
	Last           map[string]float64      `json:"last,omitempty"`
	Pending        *rollout.GenerateOutput `json:"pending,omitempty"` // async: next iteration's rollouts
	PendingVersion int                     `json:"pending_version"`
	RewardSum      float64                 `json:"reward_sum"`
	LastReward     float64                 `json:"last_reward"`
	PointReward    float64                 `json:"point_reward"` // reward sum since the last curve point
	PointIters     int                     `json:"point_iters"`
	Seconds        float64                 `json:"seconds"` // wall time of the iterations, for bench rl
	Curve          []CurvePoint            `json:"curve,omitempty"`
	// Where iteration time goes, as the workflow waits on each step (async: generation overlaps).
	WaitGenerate float64 `json:"wait_generate"`
	WaitScore    float64 `json:"wait_score"`
	WaitTrain    float64 `json:"wait_train"`
	// Inside the policy step (its seconds_read + seconds_load, seconds_optimize, seconds_commit), summed.
	StepLoad     float64 `json:"step_load,omitempty"`
	StepOptimize float64 `json:"step_optimize,omitempty"`
	StepCommit   float64 `json:"step_commit,omitempty"`
	StepQueued   float64 `json:"step_queued,omitempty"` // scheduled to started
	// Outside the iterations' seconds: held-out evaluations and pruning of old versions.
	WaitEval   float64 `json:"wait_eval,omitempty"`
	WaitRetain float64 `json:"wait_retain,omitempty"`
	// Sums of per-iteration throughputs (tokens/s) of rollout generation and policy training.
	RolloutTokS float64 `json:"rollout_tok_s"`
	TrainTokS   float64 `json:"train_tok_s"`
	// Self-correction counts: samples regenerated, and those that then passed (kept as data).
	CorrTried  int  `json:"corr_tried,omitempty"`
	CorrPassed int  `json:"corr_passed,omitempty"`
	Started    bool `json:"started"`
	// PendingShards are the next iteration's shards (async, sharded runs) across continue-as-new.
	PendingShards []rollout.GenerateOutput `json:"pending_shards,omitempty"`
}

// RL is the rollout → reward → train loop over policy versions, in sync or async mode, with held-out
// evaluation and back-tracking branches. It starts from `from` (also the reference model).
func RL(ctx workflow.Context, in PhaseInput) (PhaseOutput, error) {
	c, err := DecodePhaseConfig(in.Kind, in.Config, "config")
	if err != nil {
		return PhaseOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidConfig", err)
	}
	cfg := c.(*RLConfig)
	if in.From == "" {
		err := &config.FieldError{Path: "from", Msg: "an RL phase starts from a checkpoint (put an sft phase before it, or set from)"}
		return PhaseOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidConfig", err)
	}
	seed := uint64(in.Seed)
	var st RLState
	if in.RL != nil {
		st = *in.RL
	}
	retry := &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
		NonRetryableErrorTypes: []string{"InvalidInput"}}
	opts := func(queue string) workflow.Context {
		return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: queue, StartToCloseTimeout: 2 * time.Hour,
			HeartbeatTimeout: cfg.HeartbeatTimeout.D(), RetryPolicy: retry})
	}
	rolloutCtx, rewardCtx, trainCtx := opts(QueueRollout), opts(QueueReward), opts(QueueTrainer)
	_, retainCtx := trainerContexts(ctx, cfg.HeartbeatTimeout.D())
	evaluate := func(uri string) (map[string]float64, error) {
		var out train.EvalOutput
		err := workflow.ExecuteActivity(trainCtx, train.EvaluateName, train.EvalInput{
			Store: in.Store, Checkpoint: uri, Data: cfg.Data, Examples: cfg.Eval.Examples, MaxNewTokens: cfg.evalMaxNewTokens(),
			PassK: cfg.Eval.PassK, Temperature: cfg.Eval.Temperature, Seed: seed,
			Log:   &train.LogAt{Run: in.RunID, Phase: st.Dir, Step: st.Iter},
			Tools: cfg.evalTools(), MaxTurns: cfg.evalMaxTurns(),
		}).Get(ctx, &out)
		return out.Metrics, err
	}
	generate := func(policy string, version, iter int) workflow.Future {
		return workflow.ExecuteActivity(rolloutCtx, rollout.GenerateName, rollout.GenerateInput{
			Store: in.Store, Run: in.RunID, Phase: in.Phase, Checkpoint: policy, PolicyVersion: version, Iteration: iter,
			Data: cfg.Data, Seed: seed, Prompts: cfg.Prompts, Group: cfg.Group, MaxNewTokens: cfg.MaxNewTokens, Temperature: cfg.Temperature,
			Tools: cfg.Rollout.Tools, MaxTurns: cfg.Rollout.MaxTurns, MaxTokens: cfg.Rollout.MaxTokens,
		})
	}
	// failedOf returns the first failed samples of verdicts (file order) and their feedback.
	failedOf := func(vs []reward.ItemVerdict) (idx []int, fb []string) {
		for i, v := range vs {
			if !v.Pass && v.Error == "" && len(idx) < cfg.SelfCorrect.MaxSamples {
				idx, fb = append(idx, i), append(fb, v.Feedback)
			}
		}
		return idx, fb
	}
	// selfCorrect regenerates the failed samples idx (file order of src, or of the shards srcShards
	// read as one) with their feedback fb, for up to cfg.SelfCorrect.Retries rounds, and keeps the
	// corrections that pass as data.
	selfCorrect := func(src string, srcShards []string, idx []int, fb []string) error {
		for round := 1; round <= cfg.SelfCorrect.Retries && len(idx) > 0; round++ {
			var rg rollout.GenerateOutput
			if err := workflow.ExecuteActivity(rolloutCtx, rollout.GenerateName, rollout.GenerateInput{
				Store: in.Store, Run: in.RunID, Phase: st.Dir, Checkpoint: st.Policy, PolicyVersion: st.Version, Iteration: st.Iter,
				Data: cfg.Data, Seed: seed, Group: 1, MaxNewTokens: cfg.MaxNewTokens, Temperature: cfg.Temperature,
				RetryOf: src, RetryOfShards: srcShards, RetryIndex: idx, RetryFeedback: fb, RetryResample: cfg.SelfCorrect.Resample, Tag: fmt.Sprintf("retry%d", round),
			}).Get(ctx, &rg); err != nil {
				return fmt.Errorf("self-correction round %d: %w", round, err)
			}
			var rsc reward.ScoreOutput
			if err := workflow.ExecuteActivity(rewardCtx, reward.ScoreName, reward.ScoreInput{Rollouts: rg.Rollouts, Spec: cfg.Reward}).Get(ctx, &rsc); err != nil {
				return fmt.Errorf("self-correction round %d: score: %w", round, err)
			}
			var passed, failed []int
			var failedFb []string
			for k, v := range rsc.Verdicts {
				switch {
				case v.Pass:
					passed = append(passed, k)
				case v.Error == "":
					failed, failedFb = append(failed, k), append(failedFb, v.Feedback)
				}
			}
			st.CorrTried += len(idx)
			st.CorrPassed += len(passed)
			if len(passed) > 0 {
				if err := workflow.ExecuteActivity(rolloutCtx, rollout.KeepName, rollout.KeepInput{
					Store: in.Store, Run: in.RunID, Phase: st.Dir, Iteration: st.Iter, Round: round, Rollouts: rg.Rollouts, Index: passed,
				}).Get(ctx, nil); err != nil {
					return fmt.Errorf("self-correction round %d: keep: %w", round, err)
				}
			}
			src, srcShards, idx, fb = rg.Rollouts, nil, failed, failedFb
		}
		return nil
	}
	if !st.Started {
		st = RLState{Started: true, Policy: in.From, Reference: in.From, Dir: in.Phase, Root: workflow.GetInfo(ctx).WorkflowExecution.ID,
			LRScale: 1, KLScale: 1, FreshOptimizer: true,
			Good: in.From}
		if cfg.Eval.Before {
			if st.Before, err = evaluate(in.From); err != nil {
				return PhaseOutput{}, fmt.Errorf("%s %s: evaluate start: %w", in.Kind, in.Phase, err)
			}
			st.GoodScore = st.Before["heldout_exact_match"]
			st.Curve = append(st.Curve, CurvePoint{ExactMatch: st.GoodScore})
		}
	}
	if err := upsertSearch(ctx, in.Search, rlIdentity(in, &st)...); err != nil {
		return PhaseOutput{}, err
	}
	async := cfg.Mode == "async"
	var next workflow.Future // async: rollouts of iteration st.Iter being generated
	nextVersion := 0
	// Sharded iterations (rl_shards.go): per-sample data by reference, generation and scoring fanned
	// out. Runs started before keep one Generate and one Score per iteration with inline verdicts.
	sharded := workflow.GetVersion(ctx, "rl-sharded", workflow.DefaultVersion, 1) >= 1
	fan := rlFanOut{rolloutCtx: rolloutCtx, rewardCtx: rewardCtx, in: in, cfg: cfg, seed: seed}
	var nextShards []workflow.Future // async, sharded: shards of iteration st.Iter being generated
	// From "rl-overlap" on, an async run scores the next iteration's shards while the policy step
	// trains (nextPipe), and every run (sync too) prunes old versions (retain) while the next
	// iteration runs: neither stands between two steps any more.
	overlap := sharded && workflow.GetVersion(ctx, "rl-overlap", workflow.DefaultVersion, 1) >= 1
	var nextPipe *rlPipe          // overlap, async: nextShards with their scoring
	var retainFut workflow.Future // overlap: the last retain, awaited before the next one
	awaitRetain := func() error {
		if retainFut == nil {
			return nil
		}
		f := retainFut
		retainFut = nil
		if err := f.Get(ctx, nil); err != nil {
			return fmt.Errorf("%s %s: retain: %w", in.Kind, in.Phase, err)
		}
		return nil
	}
	backtrack := func(reason string) error {
		if len(st.Branches) >= cfg.Backtrack.Budget {
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("%s %s: back-tracking budget (%d) exhausted: %s", in.Kind, in.Phase, cfg.Backtrack.Budget, reason), "BacktrackBudget", nil)
		}
		st.LRScale *= cfg.Backtrack.LRFactor
		st.KLScale *= cfg.Backtrack.KLFactor
		b := Branch{Iteration: st.Iter, Reason: reason, FromVersion: st.Version, ToVersion: st.GoodVersion, Checkpoint: st.Good,
			LRScale: st.LRScale, KLScale: st.KLScale}
		// A marker event in the history records the decision; the memo shows it in the Web UI.
		var recorded Branch
		if err := workflow.SideEffect(ctx, func(workflow.Context) any { return b }).Get(&recorded); err != nil {
			return err
		}
		st.Branches = append(st.Branches, recorded)
		st.Policy, st.Version = st.Good, st.GoodVersion
		st.Dir = fmt.Sprintf("%s.b%d", in.Phase, len(st.Branches))
		st.FreshOptimizer = st.Good == in.From
		st.Pending, next = nil, nil
		st.PendingShards, nextShards, nextPipe = nil, nil, nil
		workflow.GetLogger(ctx).Warn("back-tracking", "reason", reason, "to_version", st.GoodVersion, "lr_scale", st.LRScale)
		if err := workflow.UpsertMemo(ctx, map[string]any{"branches": len(st.Branches), "last_branch": reason}); err != nil {
			return err
		}
		return upsertSearch(ctx, in.Search, SABacktrack.ValueSet(BacktrackBranched))
	}
	outOfTime := func() bool { return cfg.MaxSeconds > 0 && st.Seconds >= cfg.MaxSeconds }
	// branch runs the rest of the phase, from the restored checkpoint, as a child workflow
	// Root.bN of the same type (the Web UI shows the branch tree; each branch has its own history)
	// and returns its result; the parent has recorded why (a marker and the memo).
	branch := func() (PhaseOutput, error) {
		// Runs that back-tracked in place before branches were child workflows replay as they ran.
		if workflow.GetVersion(ctx, "rl-branch-child", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
			return PhaseOutput{}, errInPlace
		}
		next := in
		next.RL = &st
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: fmt.Sprintf("%s.b%d", st.Root, len(st.Branches))})
		var out PhaseOutput
		err := workflow.ExecuteChildWorkflow(cctx, workflow.GetInfo(ctx).WorkflowType.Name, next).Get(ctx, &out)
		return out, err
	}
	for st.Iter < cfg.Iterations && !outOfTime() {
		iterStart := workflow.Now(ctx)
		var gen rollout.GenerateOutput
		var batch rlBatch // sharded
		genVersion := st.Version
		switch {
		case st.Pending != nil:
			gen, genVersion, st.Pending = *st.Pending, st.PendingVersion, nil
			if sharded { // pending from a run before shards: score it as one shard
				batch = fan.started([]rollout.GenerateOutput{gen})
			}
		case len(st.PendingShards) > 0:
			batch, genVersion, st.PendingShards = fan.started(st.PendingShards), st.PendingVersion, nil
		case nextPipe != nil:
			if batch, err = nextPipe.wait(ctx); err != nil {
				return PhaseOutput{}, fmt.Errorf("%s %s: generate iteration %d: %w", in.Kind, in.Phase, st.Iter, err)
			}
			genVersion, nextShards, nextPipe = nextVersion, nil, nil
		case nextShards != nil:
			if batch, err = fan.await(ctx, nextShards); err != nil {
				return PhaseOutput{}, fmt.Errorf("%s %s: generate iteration %d: %w", in.Kind, in.Phase, st.Iter, err)
			}
			genVersion, nextShards = nextVersion, nil
		case sharded:
			if batch, err = fan.await(ctx, fan.generate(st.Policy, st.Version, st.Iter)); err != nil {
				return PhaseOutput{}, fmt.Errorf("%s %s: generate iteration %d: %w", in.Kind, in.Phase, st.Iter, err)
			}
		case next != nil:
			if err := next.Get(ctx, &gen); err != nil {
				return PhaseOutput{}, fmt.Errorf("%s %s: generate iteration %d: %w", in.Kind, in.Phase, st.Iter, err)
			}
			genVersion, next = nextVersion, nil
		default:
			if err := generate(st.Policy, st.Version, st.Iter).Get(ctx, &gen); err != nil {
				return PhaseOutput{}, fmt.Errorf("%s %s: generate iteration %d: %w", in.Kind, in.Phase, st.Iter, err)
			}
		}
		st.WaitGenerate += workflow.Now(ctx).Sub(iterStart).Seconds()
		if async && st.Iter+1 < cfg.Iterations && !(cfg.MaxSeconds > 0 && st.Seconds+workflow.Now(ctx).Sub(iterStart).Seconds() >= cfg.MaxSeconds) {
			// Generate the next iteration with the current policy while this one trains.
			if sharded {
				nextShards, nextVersion = fan.generate(st.Policy, st.Version, st.Iter+1), st.Version
				if overlap {
					nextPipe = fan.pipeline(ctx, nextShards)
				}
			} else {
				next, nextVersion = generate(st.Policy, st.Version, st.Iter+1), st.Version
			}
		}
		var sc reward.ScoreOutput
		var scored rlScored // sharded
		scoreStart := workflow.Now(ctx)
		if sharded {
			if scored, err = batch.collect(ctx, cfg.SelfCorrect.MaxSamples); err != nil {
				return PhaseOutput{}, fmt.Errorf("%s %s: score iteration %d: %w", in.Kind, in.Phase, st.Iter, err)
			}
			sc.Metrics = scored.metrics
			gen.Rollouts, gen.TokensPerS = "", scored.tokensPerS() // the shards are the step's rollouts
		} else if err := workflow.ExecuteActivity(rewardCtx, reward.ScoreName, reward.ScoreInput{Rollouts: gen.Rollouts, Spec: cfg.Reward}).Get(ctx, &sc); err != nil {
			return PhaseOutput{}, fmt.Errorf("%s %s: score iteration %d: %w", in.Kind, in.Phase, st.Iter, err)
		}
		st.WaitScore += workflow.Now(ctx).Sub(scoreStart).Seconds()
		st.RolloutTokS += gen.TokensPerS
		if cfg.SelfCorrect.Retries > 0 {
			src, srcShards, idx, fb := gen.Rollouts, []string(nil), []int(nil), []string(nil)
			if sharded {
				src, srcShards, idx, fb = "", scored.sources, scored.failed, scored.feedback
			} else {
				idx, fb = failedOf(sc.Verdicts)
			}
			if err := selfCorrect(src, srcShards, idx, fb); err != nil {
				return PhaseOutput{}, fmt.Errorf("%s %s: iteration %d: %w", in.Kind, in.Phase, st.Iter, err)
			}
		}
		rewards := make([]float64, len(sc.Verdicts))
		for i, v := range sc.Verdicts {
			rewards[i] = v.Score
		}
		lc := cfg.Loss
		lc.KLBeta *= st.KLScale
		if async && lc.TISThreshold == 0 && genVersion != st.Version {
			lc.TISThreshold = 2 // stale rollouts: correct with truncated importance sampling
		}
		var ppo *train.PPOConfig // ppo kind only; nil keeps other kinds' activity input unchanged
		if cfg.PPO != nil {
			p := *cfg.PPO
			p.KLCoef *= st.KLScale
			if p.Seed == 0 {
				p.Seed = seed
			}
			ppo = &p
		}
		var step train.PolicyStepOutput
		trainStart := workflow.Now(ctx)
		if err := workflow.ExecuteActivity(trainCtx, train.PolicyStepName, train.PolicyStepInput{
			Store: in.Store, Run: in.RunID, Phase: st.Dir, Policy: st.Policy, Reference: st.Reference, Version: st.Version,
			Rollouts: gen.Rollouts, Rewards: rewards, Shards: scored.shards, Loss: lc, Optim: cfg.Optimizer, LR: rlLR(cfg, st.Iter) * st.LRScale,
			Epochs: cfg.Epochs, Minibatch: cfg.Minibatch, DynamicSampling: cfg.DynamicSampling, FreshOptimizer: st.FreshOptimizer,
			InjectNaN: cfg.InjectNaNAt == st.Iter+1 && len(st.Branches) == 0, PPO: ppo, Iteration: st.Iter,
		}).Get(ctx, &step); err != nil {
			return PhaseOutput{}, fmt.Errorf("%s %s: train iteration %d: %w", in.Kind, in.Phase, st.Iter, err)
		}
		st.Iter++
		st.WaitTrain += workflow.Now(ctx).Sub(trainStart).Seconds()
		st.TrainTokS += step.Metrics["train_tokens_per_s"]
		st.StepLoad += step.Metrics["seconds_load"] + step.Metrics["seconds_read"]
		st.StepOptimize += step.Metrics["seconds_optimize"]
		st.StepCommit += step.Metrics["seconds_commit"]
		st.StepQueued += step.Metrics["seconds_queued"]
		st.Seconds += workflow.Now(ctx).Sub(iterStart).Seconds()
		st.RewardSum += sc.Metrics.MeanScore
		st.LastReward = sc.Metrics.MeanScore
		st.PointReward += sc.Metrics.MeanScore
		st.PointIters++
		if step.NonFinite {
			if next != nil { // its rollouts come from a policy we are leaving
				_ = next.Get(ctx, nil)
			}
			drain(ctx, nextShards)
			nextPipe.drain(ctx)
			if err := awaitRetain(); err != nil {
				return PhaseOutput{}, err
			}
			if err := backtrack(fmt.Sprintf("non-finite loss or gradient at iteration %d", st.Iter)); err != nil {
				return PhaseOutput{}, err
			}
			if st.Iter < cfg.Iterations && !outOfTime() {
				if out, err := branch(); err != errInPlace {
					return out, err
				}
			}
			continue
		}
		st.Policy, st.Version, st.FreshOptimizer = step.Checkpoint, step.Version, false
		memo := map[string]any{"iteration": st.Iter, "version": st.Version, "reward_mean": sc.Metrics.MeanScore}
		last := st.Iter >= cfg.Iterations || outOfTime()
		if last || (cfg.EvalEvery > 0 && st.Iter%cfg.EvalEvery == 0) {
			evalStart := workflow.Now(ctx)
			m, err := evaluate(st.Policy)
			st.WaitEval += workflow.Now(ctx).Sub(evalStart).Seconds()
			if err != nil {
				return PhaseOutput{}, fmt.Errorf("%s %s: evaluate iteration %d: %w", in.Kind, in.Phase, st.Iter, err)
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
				if next != nil {
					_ = next.Get(ctx, nil)
				}
				drain(ctx, nextShards)
				nextPipe.drain(ctx)
				if err := awaitRetain(); err != nil {
					return PhaseOutput{}, err
				}
				if err := backtrack(fmt.Sprintf("held-out exact match fell from %.3f to %.3f at iteration %d", st.GoodScore, score, st.Iter)); err != nil {
					return PhaseOutput{}, err
				}
				if last { // the budget of iterations is spent: finish from the restored checkpoint
					st.Last = nil
					break
				}
				if out, err := branch(); err != errInPlace {
					return out, err
				}
				continue
			}
			if score >= st.GoodScore {
				st.Good, st.GoodVersion, st.GoodScore = st.Policy, st.Version, score
			}
		}
		// Prune old versions of the current branch; the last good checkpoint (back-tracking's target) is
		// marked best and kept. The version gate keeps runs started before this step replayable.
		if workflow.GetVersion(ctx, "rl-retain", workflow.DefaultVersion, 1) >= 1 {
			best := ""
			if st.Good != in.From {
				best = st.Good
			}
			retainStart := workflow.Now(ctx)
			if err := awaitRetain(); err != nil {
				return PhaseOutput{}, err
			}
			// An overlapped retain runs beside the next step, which reads this version and commits the
			// next: keeping two, it never deletes what that step or the generation beside it reads.
			// The last one runs alone and keeps keep_last.
			keep, inline := cfg.KeepLast, !overlap || last || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
			if !inline {
				keep = max(keep, 2)
			}
			f := workflow.ExecuteActivity(retainCtx, train.RetainName, train.RetainInput{
				Store: in.Store, Run: in.RunID, Phase: st.Dir, KeepLast: keep, Best: best,
			})
			if inline {
				if err := f.Get(ctx, nil); err != nil {
					return PhaseOutput{}, fmt.Errorf("%s %s: retain: %w", in.Kind, in.Phase, err)
				}
			} else {
				retainFut = f
			}
			st.WaitRetain += workflow.Now(ctx).Sub(retainStart).Seconds()
		}
		if err := workflow.UpsertMemo(ctx, memo); err != nil {
			return PhaseOutput{}, err
		}
		if err := upsertSearch(ctx, in.Search, iterationUpdates(st.Iter, memo)...); err != nil {
			return PhaseOutput{}, err
		}
		if !last && workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			if next != nil {
				var pend rollout.GenerateOutput
				if err := next.Get(ctx, &pend); err != nil {
					return PhaseOutput{}, err
				}
				st.Pending, st.PendingVersion = &pend, nextVersion
			}
			if nextShards != nil { // scored by the next run
				gens, err := awaitGenerated(ctx, nextShards)
				if err != nil {
					return PhaseOutput{}, err
				}
				nextPipe.drain(ctx) // its scoring is redone there (the same verdicts)
				st.PendingShards, st.PendingVersion = gens, nextVersion
			}
			if err := awaitRetain(); err != nil {
				return PhaseOutput{}, err
			}
			next := in
			next.RL = &st
			return PhaseOutput{}, workflow.NewContinueAsNewError(ctx, workflow.GetInfo(ctx).WorkflowType.Name, next)
		}
	}
	if err := awaitRetain(); err != nil {
		return PhaseOutput{}, err
	}
	if st.Last == nil { // ended on a back-track: report the restored checkpoint
		if st.Last, err = evaluate(st.Policy); err != nil {
			return PhaseOutput{}, err
		}
	}
	metrics := map[string]float64{
		"iterations": float64(st.Iter), "version": float64(st.Version), "backtracks": float64(len(st.Branches)),
		"reward_mean": st.RewardSum / float64(max(1, st.Iter)), "last_reward_mean": st.LastReward,
		"seconds_per_iteration": st.Seconds / float64(max(1, st.Iter)), "train_seconds": st.Seconds,
		"seconds_generate_wait": st.WaitGenerate / float64(max(1, st.Iter)), "seconds_score": st.WaitScore / float64(max(1, st.Iter)),
		"seconds_policy_step": st.WaitTrain / float64(max(1, st.Iter)),
		"seconds_step_load":   st.StepLoad / float64(max(1, st.Iter)), "seconds_step_optimize": st.StepOptimize / float64(max(1, st.Iter)),
		"seconds_step_commit": st.StepCommit / float64(max(1, st.Iter)), "seconds_step_queued": st.StepQueued / float64(max(1, st.Iter)),
		"seconds_eval": st.WaitEval, "seconds_retain": st.WaitRetain,
		"rollout_tokens_per_s": st.RolloutTokS / float64(max(1, st.Iter)), "train_tokens_per_s": st.TrainTokS / float64(max(1, st.Iter)),
	}
	if cfg.SelfCorrect.Retries > 0 {
		metrics["self_corrections_tried"], metrics["self_corrections_passed"] = float64(st.CorrTried), float64(st.CorrPassed)
	}
	copyMetrics(metrics, st.Last, "")
	copyMetrics(metrics, st.Before, "_before")
	return PhaseOutput{Checkpoint: st.Policy, Metrics: metrics, Curve: st.Curve}, nil
}
