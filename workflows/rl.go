package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/rollout/rolloutapi"
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

// RLState is the RL loop's state; it travels in PhaseInput.RL across continue-as-new.
type RLState struct {
	Iter           int                        `json:"iter"`
	Version        int                        `json:"version"`
	Policy         string                     `json:"policy"`
	Reference      string                     `json:"reference"`
	Dir            string                     `json:"dir"`  // checkpoint phase directory of the current branch
	Root           string                     `json:"root"` // workflow ID of the phase's first execution; branches are Root.b1, Root.b2, ...
	LRScale        float64                    `json:"lr_scale"`
	KLScale        float64                    `json:"kl_scale"`
	FreshOptimizer bool                       `json:"fresh_optimizer"`
	Good           string                     `json:"good"`
	GoodVersion    int                        `json:"good_version"`
	GoodScore      float64                    `json:"good_score"`
	Branches       []Branch                   `json:"branches,omitempty"`
	Before         map[string]float64         `json:"before,omitempty"`
	Last           map[string]float64         `json:"last,omitempty"`
	Pending        *rolloutapi.GenerateOutput `json:"pending,omitempty"` // async, runs before rl-sharded: next iteration's rollouts
	PendingVersion int                        `json:"pending_version"`
	RewardSum      float64                    `json:"reward_sum"`
	LastReward     float64                    `json:"last_reward"`
	PointReward    float64                    `json:"point_reward"` // reward sum since the last curve point
	PointIters     int                        `json:"point_iters"`
	Seconds        float64                    `json:"seconds"` // wall time of the iterations, for bench rl
	Curve          []CurvePoint               `json:"curve,omitempty"`
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
	PendingShards []rolloutapi.GenerateOutput `json:"pending_shards,omitempty"`
	// Agent episodes (rolloutapi.agent): groups dropped because an episode failed past its retries,
	// and failed attempts, summed over the iterations.
	AgentDropped  int `json:"agent_dropped,omitempty"`
	AgentFailures int `json:"agent_failures,omitempty"`
	// Steer is what people changed while the phase runs (steer.go); nil until someone does.
	Steer *SteerState `json:"steer,omitempty"`
	// Flights are the iterations generating ahead (async with max_staleness > 1 or partial,
	// rl_async.go) across continue-as-new, the oldest first.
	Flights []AsyncFlight `json:"flights,omitempty"`
	// DPO sums online DPO's pairs (rl_dpo.go); nil for the other kinds.
	DPO *DPOSums `json:"dpo,omitempty"`
}

// RL is the rollout → reward → train loop over policy versions, in sync or async mode, with held-out
// evaluation and back-tracking branches. It starts from `from` (also the reference model).
func RL(ctx workflow.Context, in PhaseInput) (PhaseOutput, error) {
	r, err := newRLRun(ctx, in)
	if err != nil {
		return PhaseOutput{}, err
	}
	if err := r.begin(); err != nil {
		return PhaseOutput{}, err
	}
	for {
		if err := r.atBoundary(); err != nil {
			return PhaseOutput{}, err
		}
		if r.spent() {
			break
		}
		if out, end, err := r.iteration(); end || err != nil {
			return out, err
		}
	}
	r.steer.finishing = true
	return r.finish()
}

// rlRun is one execution of an RL phase (a run between two continue-as-new, or a back-tracking
// branch): the loop's state, the contexts of its activities, and where its rollouts come from. Its
// methods are the loop's steps; RL only sequences them. The state is all that outlives the run.
type rlRun struct {
	ctx                                        workflow.Context
	rolloutCtx, rewardCtx, trainCtx, retainCtx workflow.Context
	in                                         PhaseInput
	cfg                                        *RLConfig
	seed                                       uint64
	async                                      bool
	st                                         RLState
	src                                        rolloutSource
	// overlap (runs from "rl-overlap" on): retain runs beside the next iteration (retainFut, the
	// last one started, awaited before the next one) and async runs score beside the step.
	overlap   bool
	retainFut workflow.Future
	steer     *steering
}

// newRLRun decodes and checks the phase's config; bad config is never retried.
func newRLRun(ctx workflow.Context, in PhaseInput) (*rlRun, error) {
	var applied []Assignment
	if in.RL != nil && in.RL.Steer != nil {
		applied = in.RL.Steer.Applied
	}
	c, err := decodeEffective("config", in.Kind, in.Config, applied)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidConfig", err)
	}
	cfg := c.(*RLConfig)
	cfg.resolveRefs(in.Earlier)
	if in.From == "" {
		err := &config.FieldError{Path: "from", Msg: "an RL phase starts from a checkpoint (put an sft phase before it, or set from)"}
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidConfig", err)
	}
	r := &rlRun{ctx: ctx, in: in, cfg: cfg, seed: uint64(in.Seed), async: cfg.Mode == "async"}
	if in.RL != nil {
		r.st = *in.RL
	}
	retry := &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
		NonRetryableErrorTypes: []string{"InvalidInput"}}
	opts := func(queue string) workflow.Context {
		return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: queue, StartToCloseTimeout: 2 * time.Hour,
			HeartbeatTimeout: cfg.HeartbeatTimeout.D(), RetryPolicy: retry})
	}
	r.rolloutCtx, r.rewardCtx, r.trainCtx = opts(QueueRollout), opts(QueueReward), opts(QueueTrainer)
	_, r.retainCtx = trainerContexts(ctx, cfg.HeartbeatTimeout.D())
	r.steer, err = newSteering(ctx, in, r.st.Steer, "iteration", func() int { return r.st.Iter }, r.retainCtx,
		func() string { return r.st.Dir }, func(s *SteerState) { r.st.Steer = s })
	return r, err
}

// atBoundary applies what people asked for at the boundary before iteration st.Iter (steer.go):
// a changed config is decoded again in place (the rollout fan-out reads the same struct), and a
// pause first settles the work in flight. A change that ends the phase here drops what runs ahead.
func (r *rlRun) atBoundary() error {
	changed, err := r.steer.boundary(r.st.Iter, func() error {
		r.src.settle(r)
		return r.awaitRetain()
	})
	if err != nil {
		return err
	}
	r.steer.next = r.st.Iter + 1
	if !changed {
		return nil
	}
	c, err := decodeEffective("config", r.in.Kind, r.in.Config, r.steer.st.Applied)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), "InvalidConfig", err)
	}
	*r.cfg = *c.(*RLConfig)
	r.cfg.resolveRefs(r.in.Earlier)
	if r.spent() {
		r.src.drop(r)
	}
	return nil
}

// begin starts the phase on its first run (evaluating the starting checkpoint with eval.before),
// shows the run's identity, and picks the rollout source the run's history allows.
func (r *rlRun) begin() error {
	st, in := &r.st, r.in
	if !st.Started {
		// Steer survives: a request can arrive with the phase's first workflow task, before this.
		*st = RLState{Started: true, Policy: in.From, Reference: in.From, Dir: in.Phase, Root: workflow.GetInfo(r.ctx).WorkflowExecution.ID,
			LRScale: 1, KLScale: 1, FreshOptimizer: true, Good: in.From, Steer: st.Steer}
		if r.cfg.Eval.Before {
			var err error
			if st.Before, err = r.evaluate(in.From); err != nil {
				return r.fail("evaluate start", err)
			}
			st.GoodScore = st.Before["heldout_exact_match"]
			st.Curve = append(st.Curve, CurvePoint{ExactMatch: st.GoodScore})
		}
	}
	if err := upsertSearch(r.ctx, in.Search, rlIdentity(in, st)...); err != nil {
		return err
	}
	r.src = r.pickSource()
	return nil
}

// iteration runs iteration st.Iter: its rollouts and their scores, the policy step, and what follows
// it (evaluation and keep-best, a back-track, retain, continue-as-new). end says the phase's result
// is out: a branch child's, or an error (continue-as-new is one).
func (r *rlRun) iteration() (out PhaseOutput, end bool, err error) {
	st := &r.st
	iterStart := workflow.Now(r.ctx)
	if err := r.nextRollouts(iterStart); err != nil {
		return PhaseOutput{}, true, err
	}
	b, err := r.score()
	if err != nil {
		return PhaseOutput{}, true, err
	}
	step, err := r.step(b, iterStart)
	if err != nil {
		return PhaseOutput{}, true, err
	}
	if step.NonFinite {
		return r.backTrack(fmt.Sprintf("non-finite loss or gradient at iteration %d", st.Iter), false)
	}
	st.Policy, st.Version, st.FreshOptimizer = step.Checkpoint, step.Version, false
	memo := map[string]any{"iteration": st.Iter, "version": st.Version, "reward_mean": b.metrics.MeanScore}
	last := r.spent()
	if last || (r.cfg.EvalEvery > 0 && st.Iter%r.cfg.EvalEvery == 0) {
		regression, err := r.judge(memo)
		if err != nil {
			return PhaseOutput{}, true, err
		}
		if regression != "" {
			return r.backTrack(regression, true)
		}
	}
	if err := r.retain(last); err != nil {
		return PhaseOutput{}, true, err
	}
	if err := workflow.UpsertMemo(r.ctx, memo); err != nil {
		return PhaseOutput{}, true, err
	}
	if err := upsertSearch(r.ctx, r.in.Search, iterationUpdates(st.Iter, memo)...); err != nil {
		return PhaseOutput{}, true, err
	}
	if !last && workflow.GetInfo(r.ctx).GetContinueAsNewSuggested() {
		return PhaseOutput{}, true, r.continueAsNew()
	}
	return PhaseOutput{}, false, nil
}

// spent says the phase's iterations, or its max_seconds, are used up.
func (r *rlRun) spent() bool {
	return r.st.Iter >= r.cfg.Iterations || (r.cfg.MaxSeconds > 0 && r.st.Seconds >= r.cfg.MaxSeconds)
}

// fail names the phase and what failed.
func (r *rlRun) fail(what string, err error) error {
	return fmt.Errorf("%s %s: %s: %w", r.in.Kind, r.in.Phase, what, err)
}

// since is the workflow time since t, in seconds.
func (r *rlRun) since(t time.Time) float64 { return workflow.Now(r.ctx).Sub(t).Seconds() }

// continueAsNew hands the state, with the rollouts generated ahead, to a new run of the phase.
func (r *rlRun) continueAsNew() error {
	if err := r.src.carry(r); err != nil {
		return err
	}
	if err := r.awaitRetain(); err != nil {
		return err
	}
	next := r.in
	next.RL = &r.st
	return workflow.NewContinueAsNewError(r.ctx, workflow.GetInfo(r.ctx).WorkflowType.Name, next)
}

// finish reports the phase: the last evaluation (after a back-track at the end: of the restored
// checkpoint) and the loop's sums.
func (r *rlRun) finish() (PhaseOutput, error) {
	st := &r.st
	r.src.drop(r) // what runs ahead when max_seconds ends the phase (deep async); else nothing
	if err := r.awaitRetain(); err != nil {
		return PhaseOutput{}, err
	}
	if st.Last == nil {
		var err error
		if st.Last, err = r.evaluate(st.Policy); err != nil {
			return PhaseOutput{}, err
		}
	}
	return PhaseOutput{Checkpoint: st.Policy, Metrics: r.metrics(), Curve: st.Curve}, nil
}

// metrics are the phase's result: per-iteration means of the loop's sums, and the evaluations.
func (r *rlRun) metrics() map[string]float64 {
	st := &r.st
	n := float64(max(1, st.Iter))
	metrics := map[string]float64{
		"iterations": float64(st.Iter), "version": float64(st.Version), "backtracks": float64(len(st.Branches)),
		"reward_mean": st.RewardSum / n, "last_reward_mean": st.LastReward,
		"seconds_per_iteration": st.Seconds / n, "train_seconds": st.Seconds,
		"seconds_generate_wait": st.WaitGenerate / n, "seconds_score": st.WaitScore / n,
		"seconds_policy_step": st.WaitTrain / n,
		"seconds_step_load":   st.StepLoad / n, "seconds_step_optimize": st.StepOptimize / n,
		"seconds_step_commit": st.StepCommit / n, "seconds_step_queued": st.StepQueued / n,
		"seconds_eval": st.WaitEval, "seconds_retain": st.WaitRetain,
		"rollout_tokens_per_s": st.RolloutTokS / n, "train_tokens_per_s": st.TrainTokS / n,
	}
	if r.cfg.SelfCorrect.Retries > 0 {
		metrics["self_corrections_tried"], metrics["self_corrections_passed"] = float64(st.CorrTried), float64(st.CorrPassed)
	}
	if r.cfg.Rollout.Agent != nil {
		metrics["agent_groups_dropped"], metrics["agent_failures"] = float64(st.AgentDropped), float64(st.AgentFailures)
	}
	if r.cfg.Preference != nil {
		st.dpoMetrics(metrics)
	}
	copyMetrics(metrics, st.Last, "")
	copyMetrics(metrics, st.Before, "_before")
	return metrics
}
