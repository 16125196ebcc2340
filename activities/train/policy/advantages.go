package policy

import (
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/advantage"
	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/algorithms/rollout"
)

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
	case losscfg.AlgoDrGRPO:
		adv, err = advantage.DrGRPO(gr)
	case losscfg.AlgoRLOO:
		adv, err = advantage.RLOO(gr)
	case losscfg.AlgoReinforcePP:
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
	default: // grpo, dapo, gspo, cispo
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

// keptRows returns the samples the policy step trains on, group by group (groups ascending, samples
// in file order): every sample, or with dynamic sampling those of groups whose rewards differ; and
// how many groups were dropped.
func keptRows(rs []rollout.Rollout, rewards []float64, dynamic bool) (idx []int, dropped int) {
	for _, g := range rollout.Groups(rs) {
		same := true
		for _, j := range g[1:] {
			same = same && rewards[j] == rewards[g[0]]
		}
		if dynamic && same {
			dropped++
			continue
		}
		idx = append(idx, g...)
	}
	return idx, dropped
}

// ppoAdvantages computes token rewards (with ppo.step_rewards: steps[i], sample i's process
// rewards, added to them; nil: none), GAE advantages (whitened over every counted token of the
// iteration, not per minibatch) and returns for the rows of every chunk, plus host metrics:
// return_mean, value_before_mean (V_old), explained_variance (1 − Var(R − V_old)/Var(R), the critic's
// fit; ≤ 0 means no better than a constant) and, when a reference was read, kl_ref (token-mean of
// log π_old − log π_ref).
func ppoAdvantages(rows []policyRows, old, ref, vals [][][]float32, chunks [][]int, rewards []float64, steps [][]advantage.StepReward, pc trainapi.PPOConfig) (adv, ret [][][]float32, m map[string]float64, err error) {
	var mask [][]bool
	var kl, values [][]float64
	var rw []float64
	var rowSteps [][]advantage.StepReward // steps of the rows, in row order
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
			if steps != nil {
				rowSteps = append(rowSteps, steps[i])
			}
		}
	}
	tr, err := advantage.TokenRewards(rw, mask, kl, pc.KLCoef)
	if err != nil {
		return nil, nil, nil, err
	}
	if steps != nil {
		if err := advantage.AddStepRewards(tr, mask, rowSteps); err != nil {
			return nil, nil, nil, err
		}
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
