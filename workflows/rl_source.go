package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/rollout/rolloutapi"
)

// rolloutSource is where an RL run's iterations get their rollouts and scores. The run calls next,
// then (async, when another iteration follows) ahead, then score, once per iteration; drop on a
// back-track and carry before continue-as-new. A source holds the work it has in flight.
//
// Implementations: shardedSource (sync runs; async runs before "rl-overlap"), pipelinedSource
// (async: the next iteration generated and scored beside the step), and inlineSource (runs before
// "rl-sharded", rl_legacy.go). pickSource (rl_legacy.go) picks one from the run's history.
type rolloutSource interface {
	// next waits for iteration st.Iter's rollouts (carried across continue-as-new, generated ahead,
	// or generated now); their scoring may start as they arrive.
	next(r *rlRun) error
	// ahead starts generating iteration st.Iter+1 with the current policy, to run beside the step.
	ahead(r *rlRun)
	// score waits for the verdicts of the rollouts next returned.
	score(r *rlRun) (rlRollouts, error)
	// drop waits for the work in flight whose policy the run is leaving, and forgets it.
	drop(r *rlRun)
	// carry waits for the rollouts generated ahead and puts them in the state for the next run.
	carry(r *rlRun) error
	// settle waits for the work in flight and keeps it (a pause: no activity runs while it lasts);
	// a failure shows where the loop reads the result.
	settle(r *rlRun)
}

// shardedSource fans each iteration out over shard activities (rl_shards.go): per-sample data by
// reference, each shard scored as soon as its rollouts exist. Generated ahead (async runs before
// "rl-overlap"), the next iteration's shards are scored when that iteration starts.
type shardedSource struct {
	fan     rlFanOut
	batch   rlBatch // this iteration's shards, their scoring started
	version int     // the policy version that generated batch
	// gens are the next iteration's shards, generating with policy version aheadVersion.
	gens         []workflow.Future
	aheadVersion int
}

func (s *shardedSource) next(r *rlRun) (err error) {
	st := &r.st
	s.version = st.Version
	switch {
	case st.Pending != nil: // left by a run before shards: score it as one shard
		s.batch, s.version, st.Pending = s.fan.started([]rolloutapi.GenerateOutput{*st.Pending}), st.PendingVersion, nil
	case len(st.PendingShards) > 0:
		s.batch, s.version, st.PendingShards = s.fan.started(st.PendingShards), st.PendingVersion, nil
	case s.gens != nil:
		s.batch, err = s.fan.await(r.ctx, s.gens)
		s.version, s.gens = s.aheadVersion, nil
	default:
		s.batch, err = s.fan.await(r.ctx, s.fan.generate(st.Policy, st.Version, st.Iter))
	}
	return err
}

func (s *shardedSource) ahead(r *rlRun) {
	s.gens, s.aheadVersion = s.fan.generate(r.st.Policy, r.st.Version, r.st.Iter+1), r.st.Version
}

func (s *shardedSource) score(r *rlRun) (rlRollouts, error) {
	sc, err := s.batch.collect(r.ctx, r.cfg.SelfCorrect.MaxSamples)
	if err != nil {
		return rlRollouts{}, err
	}
	// The shards are the step's rollouts; their verdicts are in the store (Rewards stays empty).
	return rlRollouts{version: s.version, rewards: []float64{}, shards: sc.shards, metrics: sc.metrics, tokensPerS: sc.tokensPerS(),
		srcShards: sc.sources, failed: sc.failed, feedback: sc.feedback, agentDropped: sc.agentDropped, agentFailures: sc.agentFailures}, nil
}

func (s *shardedSource) drop(r *rlRun) {
	drain(r.ctx, s.gens)
	s.gens = nil
}

func (s *shardedSource) carry(r *rlRun) error {
	if s.gens == nil {
		return nil
	}
	gens, err := awaitGenerated(r.ctx, s.gens)
	if err != nil {
		return err
	}
	r.st.PendingShards, r.st.PendingVersion = gens, s.aheadVersion // scored by the next run
	return nil
}

func (s *shardedSource) settle(r *rlRun) {
	drain(r.ctx, s.gens)
}

// pipelinedSource is the sharded source of async runs from "rl-overlap" on: the next iteration's
// shards are scored, each as soon as its rollouts exist, while the step trains (rlPipe), instead of
// standing between two steps.
type pipelinedSource struct {
	shardedSource
	pipe *rlPipe
}

func (s *pipelinedSource) next(r *rlRun) (err error) {
	if s.pipe == nil {
		return s.shardedSource.next(r)
	}
	s.batch, err = s.pipe.wait(r.ctx)
	s.version, s.gens, s.pipe = s.aheadVersion, nil, nil
	return err
}

func (s *pipelinedSource) ahead(r *rlRun) {
	s.shardedSource.ahead(r)
	s.pipe = s.fan.pipeline(r.ctx, s.gens)
}

func (s *pipelinedSource) drop(r *rlRun) {
	s.shardedSource.drop(r)
	s.pipe.drain(r.ctx)
	s.pipe = nil
}

func (s *pipelinedSource) carry(r *rlRun) error {
	if s.gens == nil {
		return nil
	}
	gens, err := awaitGenerated(r.ctx, s.gens)
	if err != nil {
		return err
	}
	s.pipe.drain(r.ctx) // its scoring is redone by the next run (the same verdicts)
	r.st.PendingShards, r.st.PendingVersion = gens, s.aheadVersion
	return nil
}

func (s *pipelinedSource) settle(r *rlRun) {
	s.shardedSource.settle(r)
	s.pipe.drain(r.ctx)
}
