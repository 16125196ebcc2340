package policy

import (
	"fmt"

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
//
// episode maps a row (the index in chunks) to its sample (rewards' and steps' index); nil: row i is
// sample i. An agent's episode of several segments (calls that did not extend one context) is
// several consecutive rows, trained each under its own prompt; GAE runs over their counted tokens as
// one trajectory, in the order the model wrote them: the sequence reward sits on the last segment's
// last counted token, and a segment's last token bootstraps from the critic's value of the next
// segment's first one (δ = r + γ·V_next − V, as between any two counted tokens apart from a masked
// gap), so that every segment is credited with the episode's outcome. The segments share their
// episode's group and version; each row's V comes from the critic under that row's own context.
func ppoAdvantages(rows []policyRows, old, ref, vals [][][]float32, chunks [][]int, episode []int, rewards []float64, steps [][]advantage.StepReward, pc trainapi.PPOConfig) (adv, ret [][][]float32, m map[string]float64, err error) {
	var mask [][]bool
	var kl, values [][]float64
	var rowEp []int // the sample of every row, in row order
	for c, ch := range chunks {
		for k, i := range ch {
			seq := rows[c].seq
			mrow, krow, vrow := make([]bool, seq), make([]float64, seq), make([]float64, seq)
			for t := range seq {
				mrow[t] = rows[c].mask[k][t] > 0
				krow[t] = float64(old[c][k][t] - ref[c][k][t])
				vrow[t] = float64(vals[c][k][t])
			}
			mask, kl, values = append(mask, mrow), append(kl, krow), append(values, vrow)
			if episode != nil {
				i = episode[i]
			}
			rowEp = append(rowEp, i)
		}
	}
	// One trajectory per sample: its consecutive rows concatenated (a sample's own row first, so
	// step rewards keep their positions in it).
	var tMask [][]bool
	var tKL, tValues [][]float64
	var rw []float64
	var tSteps [][]advantage.StepReward
	var spans [][2]int // each trajectory's rows
	seen := map[int]bool{}
	for j := 0; j < len(rowEp); {
		e, end := rowEp[j], j+1
		for end < len(rowEp) && rowEp[end] == e {
			end++
		}
		if e < 0 || seen[e] {
			return nil, nil, nil, fmt.Errorf("ppo: row %d: sample %d's rows are not consecutive", j, e)
		}
		seen[e] = true
		spans = append(spans, [2]int{j, end})
		var mr []bool
		var kr, vr []float64
		for r := j; r < end; r++ {
			mr, kr, vr = append(mr, mask[r]...), append(kr, kl[r]...), append(vr, values[r]...)
		}
		tMask, tKL, tValues, rw = append(tMask, mr), append(tKL, kr), append(tValues, vr), append(rw, rewards[e])
		if steps != nil {
			tSteps = append(tSteps, steps[e])
		}
		j = end
	}
	tr, err := advantage.TokenRewards(rw, tMask, tKL, pc.KLCoef)
	if err != nil {
		return nil, nil, nil, err
	}
	if steps != nil {
		if err := advantage.AddStepRewards(tr, tMask, tSteps); err != nil {
			return nil, nil, nil, err
		}
	}
	ta, trt, err := advantage.GAE(tr, tValues, tMask, advantage.GAEConfig{Gamma: pc.Gamma, Lambda: pc.Lambda, Whiten: true})
	if err != nil {
		return nil, nil, nil, err
	}
	// Back to rows: each trajectory's rows in order.
	a, r := make([][]float64, 0, len(mask)), make([][]float64, 0, len(mask))
	for k, sp := range spans {
		off := 0
		for j := sp[0]; j < sp[1]; j++ {
			n := len(mask[j])
			a, r = append(a, ta[k][off:off+n]), append(r, trt[k][off:off+n])
			off += n
		}
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
