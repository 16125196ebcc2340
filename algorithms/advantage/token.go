package advantage

import (
	"fmt"
	"math"
)

// TokenRewards spreads sequence rewards over tokens: row i's reward sits on its last counted token and,
// when beta > 0, every counted token also gets the KL penalty −β·kl_it, where kl_it is the caller's
// per-token estimate of KL to the reference (usually k1 = log π_old(y_t) − log π_ref(y_t)). This is
// the reward of PPO-style RLHF (Ouyang et al. 2022) and of REINFORCE++.
//
//	rewards: [batch]; mask: [batch][seq_i]; kl: [batch][seq_i] (nil when beta = 0) → [batch][seq_i]
//
// A row with no counted token gets all zeros (a padding row; there is no token to credit).
func TokenRewards(rewards []float64, mask [][]bool, kl [][]float64, beta float64) ([][]float64, error) {
	if len(rewards) != len(mask) {
		return nil, fmt.Errorf("advantage: token rewards: %d rewards for %d mask rows", len(rewards), len(mask))
	}
	if math.IsNaN(beta) || math.IsInf(beta, 0) || beta < 0 {
		return nil, fmt.Errorf("advantage: token rewards: beta=%g: must be ≥ 0", beta)
	}
	if beta > 0 {
		if err := sameShape("kl", kl, mask); err != nil {
			return nil, err
		}
	}
	out := make([][]float64, len(mask))
	for i, row := range mask {
		if math.IsNaN(rewards[i]) || math.IsInf(rewards[i], 0) {
			return nil, fmt.Errorf("advantage: token rewards: row %d: reward %g is not finite", i, rewards[i])
		}
		out[i] = make([]float64, len(row))
		last := -1
		for t, on := range row {
			if !on {
				continue
			}
			last = t
			if beta > 0 {
				out[i][t] = -beta * kl[i][t]
			}
		}
		if last >= 0 {
			out[i][last] += rewards[i]
		}
	}
	return out, nil
}

// ReinforcePPConfig tunes REINFORCE++.
type ReinforcePPConfig struct {
	Gamma  float64 `json:"gamma" default:"1" help:"discount of the per-token return; 1 for outcome rewards"`
	KLBeta float64 `json:"kl_beta" default:"0" help:"β of the per-token KL penalty folded into the reward (see TokenRewards); 0 = off"`
	Eps    float64 `json:"eps" default:"1e-8" help:"added to the batch std before dividing"`
}

// DefaultReinforcePPConfig returns Gamma 1, KLBeta 0, Eps 1e-8.
func DefaultReinforcePPConfig() ReinforcePPConfig {
	return ReinforcePPConfig{Gamma: 1, Eps: 1e-8}
}

// Validate names the first bad field.
func (c ReinforcePPConfig) Validate() error {
	switch {
	case !(c.Gamma >= 0 && c.Gamma <= 1):
		return fmt.Errorf("advantage: reinforce_pp gamma=%g: must be in [0, 1]", c.Gamma)
	case !(c.KLBeta >= 0) || math.IsInf(c.KLBeta, 0):
		return fmt.Errorf("advantage: reinforce_pp kl_beta=%g: must be ≥ 0 (0 = off)", c.KLBeta)
	case !(c.Eps > 0) || math.IsInf(c.Eps, 0):
		return fmt.Errorf("advantage: reinforce_pp eps=%g: must be > 0", c.Eps)
	}
	return nil
}

// ReinforcePP is REINFORCE++'s advantage (Hu 2025): no critic and no per-prompt group; the per-token
// return is normalised across the whole batch instead.
//
//	r_t = 1[t = last]·r − β·kl_t                  (TokenRewards; β = cfg.KLBeta)
//	G_t = Σ_{s ≥ t} γ^(s−t)·r_s                   (over the counted tokens of the row)
//	A_t = (G_t − μ) / (σ + ε)                     μ, σ: mean and population std of G over every
//	                                              counted token of the batch (as OpenRLHF does)
//
// With β = 0 and γ = 1 every token of row i has G_t = r_i, so this is the batch z-score of the
// rewards, weighted by response length. The KL penalty in the return (rather than a KL loss term) is
// the paper's main variant; leave losscfg.PolicyConfig.KLBeta at 0 with it.
//
//	rewards: [batch]; mask: [batch][seq_i]; kl: [batch][seq_i] (nil when KLBeta = 0) → [batch][seq_i]
func ReinforcePP(rewards []float64, mask [][]bool, kl [][]float64, cfg ReinforcePPConfig) ([][]float64, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tr, err := TokenRewards(rewards, mask, kl, cfg.KLBeta)
	if err != nil {
		return nil, err
	}
	out := make([][]float64, len(tr))
	for i, row := range tr {
		out[i] = make([]float64, len(row))
		ret := 0.0
		for t := len(row) - 1; t >= 0; t-- {
			if mask[i][t] {
				ret = row[t] + cfg.Gamma*ret
				out[i][t] = ret
			}
		}
	}
	whiten(out, mask, cfg.Eps)
	return out, nil
}

// GAEConfig tunes generalised advantage estimation.
type GAEConfig struct {
	Gamma  float64 `json:"gamma" default:"1" help:"discount; 1 for outcome rewards on finite responses"`
	Lambda float64 `json:"lambda" default:"0.95" help:"GAE λ: 0 = one-step TD (low variance, biased by the critic), 1 = Monte Carlo return minus V"`
	Whiten bool    `json:"whiten" default:"true" help:"normalise advantages to zero mean, unit std over the batch's counted tokens (returns are not)"`
}

// DefaultGAEConfig returns Gamma 1, Lambda 0.95, Whiten true.
func DefaultGAEConfig() GAEConfig { return GAEConfig{Gamma: 1, Lambda: 0.95, Whiten: true} }

// Validate names the first bad field.
func (c GAEConfig) Validate() error {
	switch {
	case !(c.Gamma >= 0 && c.Gamma <= 1):
		return fmt.Errorf("advantage: gae gamma=%g: must be in [0, 1]", c.Gamma)
	case !(c.Lambda >= 0 && c.Lambda <= 1):
		return fmt.Errorf("advantage: gae lambda=%g: must be in [0, 1]", c.Lambda)
	}
	return nil
}

// GAE is generalised advantage estimation for PPO (Schulman et al. 2016), over the counted tokens of
// each row:
//
//	δ_t = r_t + γ·V_{t+1} − V_t                   (V after the last counted token is 0: terminal)
//	A_t = Σ_l (γλ)^l·δ_{t+l} = δ_t + γλ·A_{t+1}
//	R_t = A_t + V_t                               (the critic's regression target, loss.ValueLoss)
//
// Masked positions inside a row (e.g. tool outputs in a multi-turn response) are skipped: t+1 means the
// next counted token, as in verl. With γ = λ = 1, A_t = Σ_{s≥t} r_s − V_t (reward-to-go minus value).
// When cfg.Whiten, advantages (not returns) are then z-scored over the batch's counted tokens
// (population std, ε = 1e-8).
//
//	tokenRewards, values: [batch][seq_i]; mask: [batch][seq_i] → advantages, returns: [batch][seq_i]
//	(0 on masked positions)
func GAE(tokenRewards, values [][]float64, mask [][]bool, cfg GAEConfig) (adv, returns [][]float64, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	if err := sameShape("rewards", tokenRewards, mask); err != nil {
		return nil, nil, err
	}
	if err := sameShape("values", values, mask); err != nil {
		return nil, nil, err
	}
	adv = make([][]float64, len(mask))
	returns = make([][]float64, len(mask))
	for i, row := range mask {
		adv[i] = make([]float64, len(row))
		returns[i] = make([]float64, len(row))
		nextV, last := 0.0, 0.0
		for t := len(row) - 1; t >= 0; t-- {
			if !row[t] {
				continue
			}
			r, v := tokenRewards[i][t], values[i][t]
			if math.IsNaN(r) || math.IsInf(r, 0) || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, nil, fmt.Errorf("advantage: gae: row %d token %d: reward %g, value %g: must be finite", i, t, r, v)
			}
			delta := r + cfg.Gamma*nextV - v
			last = delta + cfg.Gamma*cfg.Lambda*last
			adv[i][t] = last
			returns[i][t] = last + v
			nextV = v
		}
	}
	if cfg.Whiten {
		whiten(adv, mask, 1e-8)
	}
	return adv, returns, nil
}

// whiten z-scores x in place over the counted tokens (population std); masked entries stay 0.
func whiten(x [][]float64, mask [][]bool, eps float64) {
	n, sum := 0.0, 0.0
	for i, row := range x {
		for t, v := range row {
			if mask[i][t] {
				n++
				sum += v
			}
		}
	}
	if n == 0 {
		return
	}
	mu, ss := sum/n, 0.0
	for i, row := range x {
		for t, v := range row {
			if mask[i][t] {
				ss += (v - mu) * (v - mu)
			}
		}
	}
	std := math.Sqrt(ss / n)
	for i, row := range x {
		for t := range row {
			if mask[i][t] {
				row[t] = (row[t] - mu) / (std + eps)
			} else {
				row[t] = 0
			}
		}
	}
}

// sameShape checks that x has mask's rows and row lengths.
func sameShape(name string, x [][]float64, mask [][]bool) error {
	if len(x) != len(mask) {
		return fmt.Errorf("advantage: %s has %d rows, mask %d", name, len(x), len(mask))
	}
	for i := range mask {
		if len(x[i]) != len(mask[i]) {
			return fmt.Errorf("advantage: %s row %d has %d tokens, mask %d", name, i, len(x[i]), len(mask[i]))
		}
	}
	return nil
}
