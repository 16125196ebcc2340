package policy

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/gomlx/gomlx/core/tensors"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/contract"
	"github.com/temperml/temper/algorithms/advantage"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/safetensors"
)

// ppoStep is PolicyStep for loss.algorithm ppo (Schulman et al. 2017) with a value-head critic on the
// policy's trunk:
//
//  1. the policy (with its critic: contract.CriticFile, or a new seeded head) computes, before any update,
//     log π_old and V_old at every completion token; the reference log π_ref when a KL is on;
//  2. token rewards: the sequence reward on the last completion token, minus ppo.kl_coef·(log π_old −
//     log π_ref) on every completion token (advantage.TokenRewards);
//  3. GAE(γ, λ) advantages, whitened over the batch's tokens, and returns R = A + V_old (advantage.GAE);
//  4. epochs × minibatches of objective.PPO, then commit version Version+1 with its critic.
//
// The caller (PolicyStep) has checked idempotency and the loss config.
func (a *Activities) ppoStep(ctx context.Context, in contract.PolicyStepInput) (contract.PolicyStepOutput, error) {
	next := in.Version + 1
	pc := contract.DefaultPPOConfig()
	if in.PPO != nil {
		pc = *in.PPO
	}
	if err := pc.Validate(); err != nil {
		return contract.PolicyStepOutput{}, train.BadInput(fmt.Errorf("train: ppo step %s/%s: %w", in.Run, in.Phase, err))
	}
	rs, err := a.scoredRollouts(ctx, &in)
	if err != nil {
		return contract.PolicyStepOutput{}, err
	}
	if len(rs) != len(in.Rewards) {
		return contract.PolicyStepOutput{}, train.BadInput(fmt.Errorf("train: ppo step %s: %d rewards for %d rollouts", in.Rollouts, len(in.Rewards), len(rs)))
	}
	if len(rs) == 0 {
		return contract.PolicyStepOutput{}, train.BadInput(fmt.Errorf("train: ppo step %s: no rollouts", in.Rollouts))
	}
	if err := noSegments(rs, "ppo step", "use a GRPO-family phase for agents that rewrite their history"); err != nil {
		return contract.PolicyStepOutput{}, err
	}
	metrics := map[string]float64{}
	for i, r := range in.Rewards {
		if math.IsNaN(r) || math.IsInf(r, 0) {
			return contract.PolicyStepOutput{}, train.BadInput(fmt.Errorf("train: ppo step %s: reward %d is %g", in.Rollouts, i, r))
		}
	}
	rewardStats(metrics, rs, in.Rewards)

	pol, err := a.Load(ctx, in.Policy, train.LoadOptions{Optim: in.Optim, Optimizer: !in.FreshOptimizer, Head: train.HeadCritic, HeadSeed: pc.Seed})
	if err != nil {
		return contract.PolicyStepOutput{}, err
	}
	eng, cfg, newHead := pol.Engine, pol.Config, pol.NewHead
	defer eng.Close()
	ve, ok := eng.(ValueReader)
	if !ok {
		return contract.PolicyStepOutput{}, train.BadInput(fmt.Errorf("train: ppo step %s/%s: engine %T cannot read per-token values (policy.ValueReader)", in.Run, in.Phase, eng))
	}
	metrics["new_value_head"] = train.RewardFlag(newHead)

	mb := in.Minibatch
	if mb <= 0 || mb > len(rs) {
		mb = len(rs)
	}
	var chunks [][]int
	for lo := 0; lo < len(rs); lo += mb {
		ch := make([]int, 0, mb)
		for i := lo; i < min(lo+mb, len(rs)); i++ {
			ch = append(ch, i)
		}
		chunks = append(chunks, ch)
	}
	// Old log-probs and values, and reference log-probs, once per iteration, before any update.
	zero := make([]float64, len(rs))
	rows := make([]policyRows, len(chunks))
	old, ref, vals := make([][][]float32, len(chunks)), make([][][]float32, len(chunks)), make([][][]float32, len(chunks))
	for c, ch := range chunks {
		rows[c] = buildPolicyRows(rs, zero, ch)
		if old[c], err = eng.LogProbs(rows[c].batch()); err != nil {
			return contract.PolicyStepOutput{}, fmt.Errorf("train: ppo step old log-probs: %w", err)
		}
		if vals[c], err = ve.Values(rows[c].batch()); err != nil {
			return contract.PolicyStepOutput{}, fmt.Errorf("train: ppo step old values: %w", err)
		}
		ref[c] = old[c]
	}
	withRef := (in.Loss.KLBeta > 0 || pc.KLCoef > 0) && in.Reference != "" && in.Reference != in.Policy
	if withRef {
		if err := a.referenceLogProbs(ctx, in.Reference, rows, ref); err != nil {
			return contract.PolicyStepOutput{}, fmt.Errorf("train: ppo step: %w", err)
		}
	}
	adv, ret, am, err := ppoAdvantages(rows, old, ref, vals, chunks, in.Rewards, pc)
	if err != nil {
		return contract.PolicyStepOutput{}, train.BadInput(fmt.Errorf("train: ppo step %s/%s: %w", in.Run, in.Phase, err))
	}
	for k, v := range am {
		metrics[k] = v
	}
	if in.InjectNaN {
		for c := range adv {
			for _, row := range adv[c] {
				for t := range row {
					row[t] = float32(math.NaN())
				}
			}
		}
	}

	obj := objective.PPO(in.Loss)
	inputs := func(c int) ([]*tensors.Tensor, error) {
		return append(rows[c].inputs(old[c], ref[c]), train.F32(adv[c]), train.F32(vals[c]), train.F32(ret[c])), nil
	}
	nonFinite, err := optimizeEpochs(ctx, eng, obj, inputs, len(chunks), in, metrics)
	if err != nil {
		return contract.PolicyStepOutput{}, err
	}
	return a.commitPolicy(ctx, in, next, cfg, metrics, nonFinite, func(w *ckpt.Writer, st ckpt.State) error {
		return writePolicyWithCritic(ctx, w, pol, st)
	})
}

// ppoAdvantages computes token rewards, GAE advantages (whitened over every counted token of the
// iteration, not per minibatch) and returns for the rows of every chunk, plus host metrics:
// return_mean, value_before_mean (V_old), explained_variance (1 − Var(R − V_old)/Var(R), the critic's
// fit; ≤ 0 means no better than a constant) and, when a reference was read, kl_ref (token-mean of
// log π_old − log π_ref).
func ppoAdvantages(rows []policyRows, old, ref, vals [][][]float32, chunks [][]int, rewards []float64, pc contract.PPOConfig) (adv, ret [][][]float32, m map[string]float64, err error) {
	var mask [][]bool
	var kl, values [][]float64
	var rw []float64
	for c, ch := range chunks {
		for k, i := range ch {
			seq := rows[c].seq
			mrow, krow, vrow := make([]bool, seq), make([]float64, seq), make([]float64, seq)
			for t := range seq {
				mrow[t] = rows[c].mask[k][t] > 0
				krow[t] = float64(old[c][k][t] - ref[c][k][t])
				vrow[t] = float64(vals[c][k][t])
			}
			mask, kl, values, rw = append(mask, mrow), append(kl, krow), append(values, vrow), append(rw, rewards[i])
		}
	}
	tr, err := advantage.TokenRewards(rw, mask, kl, pc.KLCoef)
	if err != nil {
		return nil, nil, nil, err
	}
	a, r, err := advantage.GAE(tr, values, mask, advantage.GAEConfig{Gamma: pc.Gamma, Lambda: pc.Lambda, Whiten: true})
	if err != nil {
		return nil, nil, nil, err
	}
	var cnt, rSum, vSum, klSum, rSq, eSum, eSq float64
	adv, ret = make([][][]float32, len(chunks)), make([][][]float32, len(chunks))
	j := 0
	for c, ch := range chunks {
		for range ch {
			arow, rrow := make([]float32, len(mask[j])), make([]float32, len(mask[j]))
			for t, on := range mask[j] {
				arow[t], rrow[t] = float32(a[j][t]), float32(r[j][t])
				if on {
					e := r[j][t] - values[j][t]
					cnt++
					rSum += r[j][t]
					rSq += r[j][t] * r[j][t]
					vSum += values[j][t]
					klSum += kl[j][t]
					eSum += e
					eSq += e * e
				}
			}
			adv[c], ret[c] = append(adv[c], arow), append(ret[c], rrow)
			j++
		}
	}
	m = map[string]float64{}
	if cnt > 0 {
		m["return_mean"], m["value_before_mean"] = rSum/cnt, vSum/cnt
		varR, varE := rSq/cnt-(rSum/cnt)*(rSum/cnt), eSq/cnt-(eSum/cnt)*(eSum/cnt)
		if varR > 1e-12 {
			m["explained_variance"] = 1 - varE/varR
		}
		if pc.KLCoef > 0 {
			m["kl_ref"] = klSum / cnt
		}
	}
	return adv, ret, m, nil
}

// writePolicyWithCritic commits a PPO policy: config.json and model.safetensors of the causal LM
// alone, its value head in contract.CriticFile, the optimizer state (head included) and state.json.
func writePolicyWithCritic(ctx context.Context, w *ckpt.Writer, pol *train.Loaded, st ckpt.State) error {
	eng := pol.Engine
	if err := train.WriteModelFiles(ctx, w, pol); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := eng.SaveWeights(&buf); err != nil {
		return fmt.Errorf("write %s: %w", contract.ModelFile, err)
	}
	f, err := safetensors.Read(bytes.NewReader(buf.Bytes()))
	if err != nil {
		return fmt.Errorf("write %s: %w", contract.ModelFile, err)
	}
	var policy, critic []safetensors.Tensor
	for _, t := range f.Tensors {
		if strings.HasPrefix(t.Name, "score.") {
			critic = append(critic, t)
		} else {
			policy = append(policy, t)
		}
	}
	if len(critic) != 2 {
		return fmt.Errorf("write %s: the engine saved %d value-head tensors, want %s and %s", contract.CriticFile, len(critic), train.ScoreWeight, train.ScoreBias)
	}
	for _, part := range []struct {
		name string
		ts   []safetensors.Tensor
	}{{contract.ModelFile, policy}, {contract.CriticFile, critic}} {
		var b bytes.Buffer
		if err := safetensors.Write(&b, part.ts, f.Metadata); err != nil {
			return fmt.Errorf("write %s: %w", part.name, err)
		}
		if err := w.Add(ctx, part.name, &b); err != nil {
			return err
		}
	}
	if err := train.Stream(ctx, w, contract.OptimizerFile, eng.SaveOptimizer); err != nil {
		return err
	}
	return w.AddState(ctx, st)
}
