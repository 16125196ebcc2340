package preference

import (
	"context"
	"fmt"
	"math"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/rollout"
)

// OnlineDPOStep is online DPO's policy step: it reads the iteration's scored rollouts, pairs each
// prompt's best sample with its worst (rollout.PreferencePairs: ties skipped), reads the
// reference's log-probs of every pair before any update, trains Epochs passes of the pairwise loss
// (the preference family's objective, one optimizer step per minibatch of pairs) and commits
// version Version+1 with its metrics:
//
//	pairs_formed, ties_skipped, pair_groups   pairs made, groups skipped as ties, groups seen
//	pair_score_gap                            mean verifier score of chosen minus rejected
//	rewards/margin, rewards/accuracy, ...     the objective's implicit-reward metrics, averaged
//	                                          over the optimizer steps (before each step's update)
//
// An iteration without a pair commits the policy unchanged as the next version. Idempotent: a
// version an earlier attempt committed is returned as is.
func (a *Activities) OnlineDPOStep(ctx context.Context, in trainapi.OnlineDPOStepInput) (trainapi.PolicyStepOutput, error) {
	next := in.Version + 1
	op := fmt.Sprintf("train: online %s step %s/%s", in.Loss.Kind, in.Run, in.Phase)
	if uri, st, ok, err := a.Committed(ctx, in.Store, in.Run, in.Phase, next); err != nil {
		return trainapi.PolicyStepOutput{}, err
	} else if ok {
		return trainapi.PolicyStepOutput{Checkpoint: uri, Version: next, Metrics: st.Scalars, Resumed: true,
			NonFinite: st.Scalars["non_finite"] > 0}, nil
	}
	if in.Loss.Kind != losscfg.PrefDPO && in.Loss.Kind != losscfg.PrefIPO {
		return trainapi.PolicyStepOutput{}, train.BadInput(fmt.Errorf("%s: loss kind %q: online DPO trains dpo or ipo", op, in.Loss.Kind))
	}
	obj, err := objective.Preference(in.Loss)
	if err != nil {
		return trainapi.PolicyStepOutput{}, train.BadInput(fmt.Errorf("%s: %w", op, err))
	}
	readStart := time.Now()
	rs, scores, err := train.ReadScoredShards(ctx, a.Ckpt, in.Shards)
	if err != nil {
		return trainapi.PolicyStepOutput{}, err
	}
	pairs, ps, err := rollout.PreferencePairs(rs, scores)
	if err != nil {
		return trainapi.PolicyStepOutput{}, train.BadInput(fmt.Errorf("%s: %w", op, err))
	}
	s := &dpoStep{a: a, in: in, op: op, obj: obj, metrics: pairMetrics(ps, pairs), batches: pairBatches(rs, pairs, in.Minibatch)}
	s.metrics["seconds_read"] = time.Since(readStart).Seconds()
	if activity.IsActivity(ctx) { // how long the step waited for a trainer to take it
		info := activity.GetInfo(ctx)
		s.metrics["seconds_queued"] = info.StartedTime.Sub(info.ScheduledTime).Seconds()
	}
	return s.run(ctx)
}

// pairMetrics are the iteration's pair counts and the mean score gap of its pairs.
func pairMetrics(ps rollout.PairStats, pairs []rollout.Pair) map[string]float64 {
	m := map[string]float64{"pairs_formed": float64(ps.Pairs), "ties_skipped": float64(ps.Ties), "pair_groups": float64(ps.Groups)}
	if len(pairs) > 0 {
		var gap float64
		for _, p := range pairs {
			gap += p.Gap
		}
		m["pair_score_gap"] = gap / float64(len(pairs))
	}
	return m
}

// pairBatch is one minibatch of pairs laid out as the objective's two sides, one row per pair,
// both sides padded to one length (one forward pass scores them together).
type pairBatch struct{ chosen, rejected prefSide }

// pairBatches lays out the pairs in minibatches of mb pairs (0: all in one): each side's sequence
// is the prompt the policy saw and the tokens it sampled, the sampled ones trained on.
func pairBatches(rs []rollout.Rollout, pairs []rollout.Pair, mb int) []pairBatch {
	if mb <= 0 || mb > len(pairs) {
		mb = len(pairs)
	}
	var out []pairBatch
	for lo := 0; lo < len(pairs); lo += mb {
		var c, r []data.Encoded
		for _, p := range pairs[lo:min(lo+mb, len(pairs))] {
			c, r = append(c, sampled(rs[p.Chosen])), append(r, sampled(rs[p.Rejected]))
		}
		seq := max(longest(c), longest(r))
		out = append(out, pairBatch{chosen: layoutSide(c, seq), rejected: layoutSide(r, seq)})
	}
	return out
}

// sampled is a rollout as an encoded sequence: its prompt, then its completion tokens, trained.
func sampled(r rollout.Rollout) data.Encoded {
	ids := append(append([]int{}, r.PromptTokens...), r.Tokens...)
	trained := make([]bool, len(ids))
	for t := len(r.PromptTokens); t < len(ids); t++ {
		trained[t] = true
	}
	return data.Encoded{IDs: ids, Loss: trained}
}

// dpoStep is one online DPO step: its minibatches of pairs, their reference log-probs, its metrics.
type dpoStep struct {
	a       *Activities
	in      trainapi.OnlineDPOStepInput
	op      string
	obj     objective.Objective
	batches []pairBatch
	refs    [][2][][]float32 // per minibatch: the reference's log-probs of chosen and rejected
	metrics map[string]float64
	hb      *train.Beats // the step's heartbeats
}

// run reads the reference log-probs, optimizes and commits. The reference is loaded and closed
// before the policy, so that the two are never held together; while the reference is the policy
// (the phase's first version), the policy itself scores the pairs before its first update.
func (s *dpoStep) run(ctx context.Context) (trainapi.PolicyStepOutput, error) {
	// Between these beats, a goroutine beats too (train.Beats): one optimizer step over a large
	// minibatch, or a reference pass, can outlast the heartbeat timeout on a loaded machine.
	hb := train.StartBeats(ctx)
	defer hb.Stop()
	s.hb = hb
	beat := func() { hb.Beat(trainapi.Progress{}) }
	loadStart := time.Now()
	ownRef := s.in.Reference == "" || s.in.Reference == s.in.Policy
	if !ownRef && len(s.batches) > 0 {
		ref, err := s.a.Load(ctx, s.in.Reference, train.LoadOptions{})
		if err != nil {
			return trainapi.PolicyStepOutput{}, err
		}
		err = s.readRefs(ref.Engine, beat)
		ref.Close()
		if err != nil {
			return trainapi.PolicyStepOutput{}, err
		}
	}
	pol, err := s.a.Load(ctx, s.in.Policy, train.LoadOptions{Optim: s.in.Optim, Optimizer: !s.in.FreshOptimizer})
	if err != nil {
		return trainapi.PolicyStepOutput{}, err
	}
	defer pol.Close()
	s.metrics["seconds_load"] = time.Since(loadStart).Seconds()
	beat()
	if ownRef && len(s.batches) > 0 {
		if err := s.readRefs(pol.Engine, beat); err != nil {
			return trainapi.PolicyStepOutput{}, err
		}
	}
	nonFinite, err := s.optimize(ctx, pol.Engine)
	if err != nil {
		return trainapi.PolicyStepOutput{}, err
	}
	return s.commit(ctx, pol, nonFinite)
}

// readRefs scores every minibatch's two sides with eng, the reference (InjectNaN poisons them).
func (s *dpoStep) readRefs(eng train.Scorer, beat func()) error {
	for _, b := range s.batches {
		var ref [2][][]float32
		for i, side := range []prefSide{b.chosen, b.rejected} {
			lp, err := eng.LogProbs(side.batch())
			if err != nil {
				return fmt.Errorf("%s: reference log-probs of %s: %w", s.op, s.in.Reference, err)
			}
			ref[i] = side.masked(lp)
			if s.in.InjectNaN {
				for _, row := range ref[i] {
					for t := range row {
						row[t] = float32(math.NaN())
					}
				}
			}
		}
		s.refs = append(s.refs, ref)
		beat()
	}
	return nil
}

// optimize runs Epochs passes of one optimizer step per minibatch and adds the objective's metrics,
// averaged over the steps, optimizer_steps and seconds_optimize; nonFinite reports a NaN/Inf loss
// or gradient norm in any step (the engine leaves the weights as they were).
func (s *dpoStep) optimize(ctx context.Context, eng train.Stepper) (nonFinite bool, err error) {
	start := time.Now()
	lr := float32(train.PolicyLR(trainapi.PolicyStepInput{Optim: s.in.Optim, Iteration: s.in.Iteration,
		Iterations: s.in.Iterations, LRScale: s.in.LRScale}))
	var acc train.StepSums
	total := max(1, s.in.Epochs) * len(s.batches)
	for range max(1, s.in.Epochs) {
		for c, b := range s.batches {
			m, err := eng.StepObjective(s.obj, objective.PrefBatch{Chosen: b.chosen.objective(), Rejected: b.rejected.objective(),
				RefChosen: s.refs[c][0], RefRejected: s.refs[c][1]}, lr)
			if err != nil {
				return false, fmt.Errorf("%s v%d: %w", s.op, s.in.Version, err)
			}
			acc.Add(m)
			s.hb.Beat(trainapi.Progress{Step: acc.Steps, Total: total})
		}
	}
	acc.MeansInto(s.metrics)
	s.metrics["optimizer_steps"] = float64(acc.Steps)
	s.metrics["seconds_optimize"] = time.Since(start).Seconds()
	s.metrics["lr"] = float64(lr)
	return acc.NonFinite, nil
}

// commit commits version Version+1 (the weights, optimizer state and the step's finite metrics)
// through the kernel's commit, the metrics log first.
func (s *dpoStep) commit(ctx context.Context, pol *train.Loaded, nonFinite bool) (trainapi.PolicyStepOutput, error) {
	next, m := s.in.Version+1, s.metrics
	if nonFinite {
		m["non_finite"] = 1
	}
	for k, v := range m {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			delete(m, k) // JSON payloads carry no NaN (non_finite says what happened)
		}
	}
	commitStart := time.Now()
	st := ckpt.State{Step: int64(next), PolicyVersion: int64(next), ConfigHash: train.ConfigHash(pol.Config), Scalars: m}
	log := []ckpt.MetricsRecord{{Kind: ckpt.RecordTrain, Step: s.in.Iteration + 1, Time: train.Now(), Metrics: m}}
	at := train.CommitAt{Store: s.in.Store, Run: s.in.Run, Phase: s.in.Phase, Step: next}
	uri, err := s.a.Commit(ctx, at, s.op, log, func(w *ckpt.Writer) error { return train.WriteModel(ctx, w, pol, st, true) })
	if err != nil {
		return trainapi.PolicyStepOutput{}, err
	}
	m["seconds_commit"] = time.Since(commitStart).Seconds()
	return trainapi.PolicyStepOutput{Checkpoint: uri, Version: next, NonFinite: nonFinite, Metrics: m}, nil
}
