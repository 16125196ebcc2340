package policy

import (
	"context"
	"fmt"
	"math"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/advantage"
	"github.com/temperml/temper/algorithms/loss"
	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/rollout"
)

// Activities are the policy activities; they share the trainer's dependencies (store client,
// engine factory) and kernel (chunk runner, engine loaders, data readers) with the other families.
type Activities struct{ *train.Activities }

// Register registers the policy activities under their contract names on the trainer queue's worker.
func Register(r train.Registrar, deps *train.Activities) {
	a := &Activities{deps}
	r.RegisterActivityWithOptions(a.PolicyStep, activity.RegisterOptions{Name: trainapi.PolicyStepName})
}

// PolicyStep trains one RL iteration and commits policy version Version+1. Every iteration follows
// one plan, whatever its form:
//
//   - rows: the rollouts held in memory (inline, or the shards read whole), or streamed from the
//     shards one minibatch at a time when they come by reference in minibatches (source.go);
//   - advantages: per sequence from the rewards of each prompt's group (GRPO family; dynamic
//     sampling drops groups whose rewards are all equal), or per token by GAE from a critic, a value
//     head trained beside the policy (loss.algorithm ppo; advantages.go, ppo.go);
//   - before any update, the policy reads π_old (and the critic V_old) of every minibatch, and the
//     reference model π_ref when a KL term needs one apart from the policy;
//   - Epochs passes of one optimizer step per minibatch, then the chunk runner's commit.
//
// Idempotent: a version an earlier attempt committed is returned as is (train.Activities.Committed).
func (a *Activities) PolicyStep(ctx context.Context, in trainapi.PolicyStepInput) (trainapi.PolicyStepOutput, error) {
	hb := train.StartBeats(ctx)
	defer hb.Stop()
	next := in.Version + 1
	if uri, st, ok, err := a.Committed(ctx, in.Store, in.Run, in.Phase, next); err != nil {
		return trainapi.PolicyStepOutput{}, err
	} else if ok {
		return trainapi.PolicyStepOutput{Checkpoint: uri, Version: next, Metrics: st.Scalars, Resumed: true,
			NonFinite: st.Scalars["non_finite"] > 0}, nil
	}
	p, err := a.plan(ctx, in)
	if err != nil {
		return trainapi.PolicyStepOutput{}, err
	}
	defer p.src.close()
	p.hb = hb
	return p.run(ctx)
}

// plan is one policy step: its minibatches and their source, its kind of advantages, its metrics.
type plan struct {
	a       *Activities
	in      trainapi.PolicyStepInput
	op      string              // "train: <algorithm> step <run>/<phase>", the errors' prefix
	gae     *trainapi.PPOConfig // token-level advantages from a critic (ppo); nil: group advantages
	rewards []float64           // per sample, in file order
	chunks  [][]int             // the minibatches' samples
	src     rowSource
	// streamed: the rows come from the shards minibatch by minibatch (else from memory).
	streamed bool
	metrics  map[string]float64
	// With GAE, per minibatch: the advantages and the critic's regression targets.
	tokAdv, returns [][][]float32
	// With ppo.step_rewards: the rollouts (file order), each one's step scores read from the
	// verdicts objects, and the policy's tokenizer (load sets it) to find where each step ends.
	stepRollouts []rollout.Rollout
	stepScores   [][]float64
	decode       func([]int) string
	// With GAE, the rollout (file order) of every row: an agent's further segments are rows after
	// their episode's own (segmentRows), and GAE runs over an episode's rows as one trajectory.
	episode []int
	hb      *train.Beats // the step's heartbeats
	// mismatch is π_old against the behaviour log-probs over the trained tokens, of the rollouts the
	// stepped version sampled (fresh) and of older ones (stale), measured by prepare on the host
	// unless the step is on-policy (then its one step measures it in the graph).
	mismatch struct {
		fresh, stale         loss.MismatchStats
		freshRows, staleRows int
	}
}

// plan reads the iteration (or, streamed, what the advantages need of it), computes its group
// advantages and reward metrics, and cuts the trained samples into minibatches.
func (a *Activities) plan(ctx context.Context, in trainapi.PolicyStepInput) (*plan, error) {
	if err := in.Loss.Validate(); err != nil {
		return nil, train.BadInput(fmt.Errorf("train: policy step %s/%s: %w", in.Run, in.Phase, err))
	}
	p := &plan{a: a, in: in, op: fmt.Sprintf("train: %s step %s/%s", in.Loss.Algorithm, in.Run, in.Phase), metrics: map[string]float64{}}
	if in.Loss.Algorithm == losscfg.AlgoPPO {
		pc := trainapi.DefaultPPOConfig()
		if in.PPO != nil {
			pc = *in.PPO
		}
		if err := pc.Validate(); err != nil {
			return nil, train.BadInput(fmt.Errorf("%s: %w", p.op, err))
		}
		p.gae = &pc
	}
	// GAE needs every row's values before the first update: PPO holds its rollouts in memory.
	p.streamed = len(in.Shards) > 0 && in.Minibatch > 0 && p.gae == nil
	readStart := time.Now()
	rs, lengths, err := p.read(ctx)
	if err != nil {
		return nil, err
	}
	p.metrics["seconds_read"] = time.Since(readStart).Seconds()
	if activity.IsActivity(ctx) { // how long the step waited for a trainer to take it
		info := activity.GetInfo(ctx)
		p.metrics["seconds_queued"] = info.StartedTime.Sub(info.ScheduledTime).Seconds()
	}
	if err := p.readStepScores(ctx, rs); err != nil {
		return nil, err
	}
	idx, adv, err := p.advantages(rs)
	if err != nil {
		return nil, err
	}
	rewardStats(p.metrics, rs, lengths, p.rewards)
	stalenessStats(p.metrics, rs, lengths, in.Version)
	// An agent's further segments are rows of their own, right after their episode's.
	var refs []rowRef
	if p.streamed {
		refs, adv = segmentRefs(rs, adv, idx)
		idx = make([]int, len(refs))
		for k := range idx {
			idx[k] = k
		}
	} else {
		n := len(rs)
		rs, adv, idx = segmentRows(rs, adv, idx)
		if p.gae != nil {
			p.episode = rowEpisodes(idx, n)
		}
	}
	mb := in.Minibatch
	if mb <= 0 || mb > len(idx) {
		mb = len(idx)
	}
	for lo := 0; lo < len(idx); lo += mb {
		p.chunks = append(p.chunks, idx[lo:min(lo+mb, len(idx))])
	}
	if p.streamed {
		if p.src, err = a.newStreamRows(ctx, in.Shards, refs, adv, p.chunks); err != nil {
			return nil, err
		}
	} else {
		p.src = newMemoryRows(rs, adv, p.chunks)
	}
	return p, nil
}

// read returns every sample of the iteration (streamed: its group and episode summary only), the
// completions' lengths, and sets the rewards.
func (p *plan) read(ctx context.Context) ([]rollout.Rollout, []int, error) {
	if p.streamed {
		rs, rewards, lengths, err := p.a.scanShards(ctx, p.in)
		p.rewards = rewards
		return rs, lengths, err
	}
	in := p.in
	rs, err := p.a.scoredRollouts(ctx, &in) // shards fill in.Rewards from their verdicts
	if err != nil {
		return nil, nil, err
	}
	if len(rs) != len(in.Rewards) {
		return nil, nil, train.BadInput(fmt.Errorf("%s: %s: %d rewards for %d rollouts", p.op, in.Rollouts, len(in.Rewards), len(rs)))
	}
	p.rewards = in.Rewards
	lengths := make([]int, len(rs))
	for i, r := range rs {
		lengths[i] = len(r.Tokens)
	}
	return rs, lengths, nil
}

// readStepScores reads, with ppo.step_rewards, every sample's step scores from the verdicts objects
// beside the shards (train.ReadStepScores): per-sample data by reference, never in the workflow's
// history; inline rewards (histories before shards) have none to read.
func (p *plan) readStepScores(ctx context.Context, rs []rollout.Rollout) error {
	if p.gae == nil || p.gae.StepRewards == nil {
		return nil
	}
	label := p.gae.StepRewards.Verifier
	if len(p.in.Shards) == 0 {
		return train.BadInput(fmt.Errorf("%s: ppo.step_rewards reads the step scores of %q from the verdicts objects of shards; this step has inline rewards", p.op, label))
	}
	scores, err := train.ReadStepScores(ctx, p.a.Ckpt, p.in.Shards, label, rs)
	if err != nil {
		return err
	}
	p.stepRollouts, p.stepScores = rs, scores
	return nil
}

// advantages returns the samples the step trains on, in minibatch order, and their sequence-level
// advantages: group advantages with every group kept, or (dynamic sampling) those of the groups
// whose rewards differ. With GAE every sample is trained in file order and the advantages come per
// token once the critic has read the rows (gaeAdvantages).
func (p *plan) advantages(rs []rollout.Rollout) (idx []int, adv []float64, err error) {
	if p.gae != nil {
		if len(rs) == 0 {
			return nil, nil, train.BadInput(fmt.Errorf("%s: %s: no rollouts", p.op, p.in.Rollouts))
		}
		for i, r := range p.rewards {
			if math.IsNaN(r) || math.IsInf(r, 0) {
				return nil, nil, train.BadInput(fmt.Errorf("%s: %s: reward %d is %g", p.op, p.in.Rollouts, i, r))
			}
		}
		idx = make([]int, len(rs))
		for i := range idx {
			idx[i] = i
		}
		return idx, make([]float64, len(rs)), nil
	}
	if adv, err = advantages(p.in.Loss.Algorithm, rs, p.rewards); err != nil {
		return nil, nil, train.BadInput(fmt.Errorf("%s: %w", p.op, err))
	}
	if p.in.InjectNaN {
		for i := range adv {
			adv[i] = math.NaN()
		}
	}
	idx, dropped := keptRows(rs, p.rewards, p.in.DynamicSampling)
	p.metrics["groups_dropped"] = float64(dropped)
	return idx, adv, nil
}

// run loads the policy, reads what the updates need before the first one, optimizes and commits.
func (p *plan) run(ctx context.Context) (trainapi.PolicyStepOutput, error) {
	loadStart := time.Now()
	pol, critic, err := p.load(ctx)
	if err != nil {
		return trainapi.PolicyStepOutput{}, err
	}
	defer pol.Close()
	eng := pol.Engine
	p.metrics["seconds_load"] = time.Since(loadStart).Seconds()
	// Between these beats, the step's goroutine beats too (train.Beats): loading, the pre-update pass
	// and one optimizer step over a full batch each once ran past the heartbeat timeout.
	beat := func() { p.hb.Beat(trainapi.Progress{}) }
	beat()
	nonFinite := false
	if len(p.chunks) > 0 {
		onPolicy := p.onPolicy()
		if err := p.prepare(ctx, eng, critic, onPolicy, beat); err != nil {
			return trainapi.PolicyStepOutput{}, err
		}
		if p.gae != nil {
			if err := p.gaeAdvantages(); err != nil {
				return trainapi.PolicyStepOutput{}, err
			}
		}
		if nonFinite, err = p.optimize(eng, onPolicy); err != nil {
			return trainapi.PolicyStepOutput{}, err
		}
	}
	write := func(w *ckpt.Writer, st ckpt.State) error { return train.WriteModel(ctx, w, pol, st, true) }
	if p.gae != nil {
		write = func(w *ckpt.Writer, st ckpt.State) error { return writePolicyWithCritic(ctx, w, pol, st) }
	}
	return p.commit(ctx, pol.Config, nonFinite, write)
}

// load loads the policy with its optimizer state (unless FreshOptimizer) and, with GAE, its critic:
// the value head of the checkpoint (a PPO checkpoint's trainapi.CriticFile, a reward model's
// score.*) or a new one seeded by ppo.seed (train.HeadCritic), asked of the engine here, once. The
// optimizer state is loaded only when the head is not new (a new head has no moments).
func (p *plan) load(ctx context.Context) (*train.Loaded, train.ValueReader, error) {
	o := train.LoadOptions{Optim: p.in.Optim, Optimizer: !p.in.FreshOptimizer}
	if p.gae != nil {
		o.Head, o.HeadSeed = train.HeadCritic, p.gae.Seed
	}
	pol, err := p.a.Load(ctx, p.in.Policy, o)
	if err != nil || p.gae == nil {
		return pol, nil, err
	}
	if p.gae.StepRewards != nil { // steps end at tokens of the policy's own tokenizer
		enc, err := train.EncoderOf(pol, train.ChatSpec{})
		if err != nil {
			pol.Close()
			return nil, nil, err
		}
		p.decode = enc.Tok.Decode
	}
	critic := pol.Engine.Caps().Values
	if critic == nil {
		pol.Close()
		return nil, nil, train.BadInput(fmt.Errorf("%s: engine %T cannot read per-token values (its Caps offer no train.ValueReader)", p.op, pol.Engine))
	}
	p.metrics["new_value_head"] = train.RewardFlag(pol.NewHead)
	return pol, critic, nil
}

// onPolicy reports a step whose π_old is the policy being stepped: one epoch of one minibatch. Its
// objective takes π_old from its own forward pass (objective.PolicyOptions.OnPolicy) and the
// separate pass is skipped, unless a KL term needs that pass as its reference. Streamed steps and
// PPO read π_old: they always have, and a recomputed commit must be the same bit for bit.
func (p *plan) onPolicy() bool {
	return p.gae == nil && !p.streamed && max(1, p.in.Epochs) == 1 && len(p.chunks) == 1 &&
		(p.in.Loss.KLBeta == 0 || p.separateReference())
}

func (p *plan) separateReference() bool { return p.in.Reference != "" && p.in.Reference != p.in.Policy }

// prepare reads every minibatch, before any update: π_old (unless on-policy), the critic's V_old,
// and π_ref from the reference model when a KL term (loss.kl_beta, or GAE's ppo.kl_coef) needs one
// apart from the policy, else π_old; the source keeps them for the updates.
func (p *plan) prepare(ctx context.Context, eng train.Scorer, critic train.ValueReader, onPolicy bool, beat func()) error {
	var ref train.Scorer
	if (p.in.Loss.KLBeta > 0 || (p.gae != nil && p.gae.KLCoef > 0)) && p.separateReference() {
		rm, err := p.a.Load(ctx, p.in.Reference, train.LoadOptions{})
		if err != nil {
			return err
		}
		defer rm.Close()
		ref = rm.Engine
	}
	for c := range p.chunks {
		rows, err := p.src.rows(c)
		if err != nil {
			return err
		}
		b := rows.batch()
		p.countRows(rows)
		var pr prepared
		if onPolicy {
			pr.old = train.Zeros(len(rows.tokens), rows.seq) // ignored by the on-policy objective
		} else if pr.old, err = eng.LogProbs(b); err != nil {
			return fmt.Errorf("%s: old log-probs: %w", p.op, err)
		} else if err := p.measureMismatch(rows, pr.old); err != nil {
			return err
		}
		if critic != nil {
			if pr.values, err = critic.Values(b); err != nil {
				return fmt.Errorf("%s: old values: %w", p.op, err)
			}
		}
		pr.ref = pr.old
		if ref != nil {
			if pr.ref, err = ref.LogProbs(b); err != nil {
				return fmt.Errorf("%s: reference log-probs of %s: %w", p.op, p.in.Reference, err)
			}
		}
		if err := p.src.keep(c, pr); err != nil {
			return err
		}
		beat()
	}
	return nil
}

// gaeAdvantages computes the token-level advantages and returns of every minibatch from the rewards
// and what prepare read (whitened over the iteration's tokens, ppoAdvantages), with their metrics.
func (p *plan) gaeAdvantages() error {
	n := len(p.chunks)
	rows, old, ref, values := make([]policyRows, n), make([][][]float32, n), make([][][]float32, n), make([][][]float32, n)
	for c := range n {
		var err error
		if rows[c], err = p.src.rows(c); err != nil {
			return err
		}
		pr, err := p.src.kept(c, rows[c])
		if err != nil {
			return err
		}
		old[c], ref[c], values[c] = pr.old, pr.ref, pr.values
	}
	var steps [][]advantage.StepReward
	if p.gae.StepRewards != nil {
		var err error
		if steps, err = stepRewards(p.stepRollouts, p.stepScores, p.decode, *p.gae.StepRewards, p.metrics); err != nil {
			return train.BadInput(fmt.Errorf("%s: %w", p.op, err))
		}
	}
	adv, ret, m, err := ppoAdvantages(rows, old, ref, values, p.chunks, p.episode, p.rewards, steps, *p.gae)
	if err != nil {
		return train.BadInput(fmt.Errorf("%s: %w", p.op, err))
	}
	for k, v := range m {
		p.metrics[k] = v
	}
	if p.in.InjectNaN {
		for c := range adv {
			for _, row := range adv[c] {
				for t := range row {
					row[t] = float32(math.NaN())
				}
			}
		}
	}
	p.tokAdv, p.returns = adv, ret
	return nil
}

// step returns minibatch c's objective and batch.
func (p *plan) step(c int, onPolicy bool) (objective.Objective, objective.Batch, error) {
	rows, err := p.src.rows(c)
	if err != nil {
		return objective.Objective{}, nil, err
	}
	pr, err := p.src.kept(c, rows)
	if err != nil {
		return objective.Objective{}, nil, err
	}
	switch {
	case p.gae != nil:
		return objective.PPO(p.in.Loss), objective.PPOBatch{PolicyRows: rows.objective(pr.old, pr.ref), Adv: p.tokAdv[c],
			OldValues: pr.values, Returns: p.returns[c]}, nil
	case p.streamed:
		// Whole rows: streamed steps never read a completion window, which agrees with whole rows
		// to rounding only, and a recomputed commit must be the same bit for bit.
		return objective.Policy(p.in.Loss), rows.policyBatch(pr.old, pr.ref, 0), nil
	}
	// Each minibatch's objective reads its completion window only (objective.PolicyOptions.Window).
	w := rows.completionWindow()
	return objective.PolicyWith(p.in.Loss, objective.PolicyOptions{OnPolicy: onPolicy, Window: w}), rows.policyBatch(pr.old, pr.ref, w), nil
}

// optimize runs Epochs passes of one optimizer step per minibatch, heartbeating each step, and adds
// to the metrics the objective's metrics averaged over the steps, optimizer_steps, seconds_optimize
// and train_tokens_per_s (the objective's "tokens" per second of optimization). nonFinite reports a
// NaN/Inf loss or gradient norm in any step.
func (p *plan) optimize(eng train.Stepper, onPolicy bool) (nonFinite bool, err error) {
	start := time.Now()
	epochs := max(1, p.in.Epochs)
	var acc train.StepSums
	total := epochs * len(p.chunks)
	for range epochs {
		for c := range p.chunks {
			obj, b, err := p.step(c, onPolicy) // a streamed step reads the minibatch from the store
			if err != nil {
				return false, fmt.Errorf("%s v%d: %w", p.op, p.in.Version, err)
			}
			m, err := eng.StepObjective(obj, b, float32(train.PolicyLR(p.in)))
			if err != nil {
				return false, fmt.Errorf("%s v%d: %w", p.op, p.in.Version, err)
			}
			acc.Add(m)
			p.hb.Beat(trainapi.Progress{Step: acc.Steps, Total: total})
		}
	}
	acc.MeansInto(p.metrics)
	p.mismatchMetrics(onPolicy)
	p.metrics["optimizer_steps"] = float64(acc.Steps)
	d := time.Since(start).Seconds()
	p.metrics["seconds_optimize"] = d
	if d > 0 {
		p.metrics["train_tokens_per_s"] = acc.Sums["tokens"] / d // completion tokens trained, all epochs
	}
	return acc.NonFinite, nil
}

// commit commits policy version Version+1 with the step's metrics (non-finite values dropped,
// non_finite and lr added) through the chunk runner's commit; write stores the weights.
func (p *plan) commit(ctx context.Context, cfg model.Config, nonFinite bool, write func(*ckpt.Writer, ckpt.State) error) (trainapi.PolicyStepOutput, error) {
	next, metrics := p.in.Version+1, p.metrics
	if nonFinite {
		metrics["non_finite"] = 1
	}
	finiteOnly(metrics)
	metrics["lr"] = train.PolicyLR(p.in)
	commitStart := time.Now()
	st := ckpt.State{Step: int64(next), PolicyVersion: int64(next), ConfigHash: train.ConfigHash(cfg), Scalars: metrics}
	log := []ckpt.MetricsRecord{{Kind: ckpt.RecordTrain, Step: p.in.Iteration + 1, Time: train.Now(), Metrics: metrics}}
	at := train.CommitAt{Store: p.in.Store, Run: p.in.Run, Phase: p.in.Phase, Step: next}
	uri, err := p.a.Commit(ctx, at, p.op, log, func(w *ckpt.Writer) error { return write(w, st) })
	if err != nil {
		return trainapi.PolicyStepOutput{}, err
	}
	// The commit's own time reaches the workflow, not the committed checkpoint's scalars.
	metrics["seconds_commit"] = time.Since(commitStart).Seconds()
	return trainapi.PolicyStepOutput{Checkpoint: uri, Version: next, NonFinite: nonFinite, Metrics: metrics}, nil
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
