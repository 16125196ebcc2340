package workflows

import (
	"errors"

	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/reward/rewardapi"
	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/algorithms/loss/losscfg"
)

// The RL loop's version gates and the paths runs started before them take, kept so that their
// histories replay as they ran (the stored histories under testdata/histories are such runs). A
// run asks each gate where it always has: the answer is recorded in its history on first start
// and replayed after. A change of behaviour adds a gate here, never an edit of a path below.
const (
	// rl-sharded: per-sample data by reference, generation and scoring fanned out over shards
	// (shardedSource). Before: one Generate and one Score per iteration, verdicts inline (inlineSource).
	versionSharded = "rl-sharded"
	// rl-overlap: async runs score the next iteration's shards beside the step (pipelinedSource), and
	// every run prunes old versions beside the next iteration. Before: after the step, and inline.
	versionOverlap = "rl-overlap"
	// rl-branch-child: a back-track runs the rest of the phase as a child workflow. Before: in place.
	versionBranchChild = "rl-branch-child"
	// rl-retain: every iteration prunes old versions of its branch. Before: none.
	versionRetain = "rl-retain"
	// rl-correction: async stale rollouts get the automatic tis_threshold 2 only when the loss chose
	// no correction itself (losscfg.PolicyConfig.CorrectionSet). Before: also beside a correction.mode,
	// which the policy step then refused as a conflict. Asked only when correction.mode is set, so
	// runs without one record nothing.
	versionCorrection = "rl-correction"

	// rl-deep-async: async runs with max_staleness > 1 or partial generations keep a queue of
	// iterations generating ahead (deepSource, rl_async.go). Before: such configs were refused, so
	// only those runs ask it.
	versionDeepAsync = "rl-deep-async"

	// rl-nan-last: a non-finite step at the last iteration drops the last evaluation, as a
	// regression there does, so the result reports the restored checkpoint's. Before: the result
	// kept the evaluation of a version the phase had left. Asked only in that case.
	versionNaNLast = "rl-nan-last"
)

// forgetsAfterNonFinite says whether a back-track after a non-finite step that ends the phase drops
// the last evaluation (asked only then).
func (r *rlRun) forgetsAfterNonFinite() bool {
	return workflow.GetVersion(r.ctx, versionNaNLast, workflow.DefaultVersion, 1) >= 1
}

// autoTIS says whether stale async rollouts get truncated importance sampling (tis_threshold 2) that
// the loss did not ask for: when it chose no correction itself.
func (r *rlRun) autoTIS(lc losscfg.PolicyConfig) bool {
	if lc.TISThreshold != 0 {
		return false
	}
	if lc.Correction.Mode == "" {
		return true
	}
	return workflow.GetVersion(r.ctx, versionCorrection, workflow.DefaultVersion, 1) == workflow.DefaultVersion
}

// pickSource picks the run's rollout source (and whether its retains overlap the next iteration).
func (r *rlRun) pickSource() rolloutSource {
	if workflow.GetVersion(r.ctx, versionSharded, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return &inlineSource{}
	}
	fan := rlFanOut{rolloutCtx: r.rolloutCtx, rewardCtx: r.rewardCtx, in: r.in, cfg: r.cfg, seed: r.seed}
	r.overlap = workflow.GetVersion(r.ctx, versionOverlap, workflow.DefaultVersion, 1) >= 1
	if r.overlap && r.async {
		if deep := r.deepSource(fan); deep != nil {
			return deep
		}
		return &pipelinedSource{shardedSource: shardedSource{fan: fan}}
	}
	return &shardedSource{fan: fan}
}

// retains says whether this run prunes old versions (asked every iteration, as it always was).
func (r *rlRun) retains() bool {
	return workflow.GetVersion(r.ctx, versionRetain, workflow.DefaultVersion, 1) >= 1
}

// errInPlace tells the loop to go on in this workflow: the history predates branch child workflows.
var errInPlace = errors.New("rl: back-track in place")

// branchesAsChildren says whether a back-track runs as a child workflow (asked at each branch).
func (r *rlRun) branchesAsChildren() bool {
	return workflow.GetVersion(r.ctx, versionBranchChild, workflow.DefaultVersion, 1) != workflow.DefaultVersion
}

// inlineSource is the rollout source of runs before "rl-sharded": one rollout.Generate and one
// reward.Score per iteration, the verdicts inline in the history. Async, it generates the next
// iteration ahead and scores it when that iteration starts; across continue-as-new those rollouts
// travel in RLState.Pending.
type inlineSource struct {
	gen          rolloutapi.GenerateOutput // this iteration's rollouts
	version      int                       // the policy version that generated gen
	gens         workflow.Future           // the next iteration's, generating with aheadVersion
	aheadVersion int
}

// generate starts the generation of iteration iter with the given policy.
func (s *inlineSource) generate(r *rlRun, policy string, version, iter int) workflow.Future {
	in, cfg := r.in, r.cfg
	return workflow.ExecuteActivity(r.rolloutCtx, rolloutapi.GenerateName, rolloutapi.GenerateInput{
		Store: in.Store, Run: in.RunID, Phase: in.Phase, Checkpoint: policy, PolicyVersion: version, Iteration: iter,
		Data: cfg.Data, Seed: r.seed, Prompts: cfg.Prompts, Group: cfg.Group, MaxNewTokens: cfg.MaxNewTokens, Temperature: cfg.Temperature,
		Tools: cfg.Rollout.Tools, MaxTurns: cfg.Rollout.MaxTurns, MaxTokens: cfg.Rollout.MaxTokens,
	})
}

func (s *inlineSource) next(r *rlRun) error {
	st := &r.st
	s.gen, s.version = rolloutapi.GenerateOutput{}, st.Version
	switch {
	case st.Pending != nil:
		s.gen, s.version, st.Pending = *st.Pending, st.PendingVersion, nil
		return nil
	case s.gens != nil:
		f := s.gens
		s.version, s.gens = s.aheadVersion, nil
		return f.Get(r.ctx, &s.gen)
	default:
		return s.generate(r, st.Policy, st.Version, st.Iter).Get(r.ctx, &s.gen)
	}
}

func (s *inlineSource) ahead(r *rlRun) {
	s.gens, s.aheadVersion = s.generate(r, r.st.Policy, r.st.Version, r.st.Iter+1), r.st.Version
}

func (s *inlineSource) score(r *rlRun) (rlRollouts, error) {
	var sc rewardapi.ScoreOutput
	if err := workflow.ExecuteActivity(r.rewardCtx, rewardapi.ScoreName, rewardapi.ScoreInput{Rollouts: s.gen.Rollouts, Spec: r.cfg.Reward}).Get(r.ctx, &sc); err != nil {
		return rlRollouts{}, err
	}
	b := rlRollouts{version: s.version, rollouts: s.gen.Rollouts, rewards: make([]float64, len(sc.Verdicts)), metrics: sc.Metrics,
		tokensPerS: s.gen.TokensPerS, src: s.gen.Rollouts}
	for i, v := range sc.Verdicts {
		b.rewards[i] = v.Score
	}
	b.failed, b.feedback = failedOf(sc.Verdicts, r.cfg.SelfCorrect.MaxSamples)
	return b, nil
}

func (s *inlineSource) drop(r *rlRun) {
	if s.gens != nil { // its rollouts come from a policy we are leaving
		_ = s.gens.Get(r.ctx, nil)
	}
	s.gens = nil
}

func (s *inlineSource) settle(r *rlRun) {
	if s.gens != nil {
		_ = s.gens.Get(r.ctx, nil)
	}
}

func (s *inlineSource) carry(r *rlRun) error {
	if s.gens == nil {
		return nil
	}
	var pend rolloutapi.GenerateOutput
	if err := s.gens.Get(r.ctx, &pend); err != nil {
		return err
	}
	r.st.Pending, r.st.PendingVersion = &pend, s.aheadVersion
	return nil
}
