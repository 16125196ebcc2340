package advantage

import (
	"fmt"
	"math"
)

// Std modes for GRPOConfig.Std.
const (
	StdSample     = "sample"     // √(Σ(r−μ)²/(G−1)), Bessel-corrected: torch.std's default
	StdPopulation = "population" // √(Σ(r−μ)²/G)
)

// GRPOConfig tunes GRPO's group normalisation.
type GRPOConfig struct {
	Eps float64 `json:"eps" default:"1e-6" help:"added to the group std before dividing, so all-equal groups give 0, not NaN"`
	Std string  `json:"std" default:"sample" help:"sample (G−1, as torch.std in TRL, verl and OpenRLHF) | population (G)"`
}

// DefaultGRPOConfig returns Eps 1e-6 (verl's), Std sample.
func DefaultGRPOConfig() GRPOConfig { return GRPOConfig{Eps: 1e-6, Std: StdSample} }

// Validate names the first bad field.
func (c GRPOConfig) Validate() error {
	switch {
	case !(c.Eps > 0) || math.IsInf(c.Eps, 0):
		return fmt.Errorf("advantage: grpo eps=%g: must be > 0", c.Eps)
	case c.Std != StdSample && c.Std != StdPopulation:
		return fmt.Errorf("advantage: grpo std=%q: allowed %q, %q", c.Std, StdSample, StdPopulation)
	}
	return nil
}

// GRPO is DeepSeekMath's group-relative advantage (Shao et al. 2024, outcome supervision):
//
//	A_i = (r_i − mean(r)) / (std(r) + ε)      over the G rewards r of one prompt's group
//
// The paper says only "normalized by the group's mean and std". The reference implementations (TRL's
// GRPOTrainer, verl's compute_grpo_outcome_advantage, OpenRLHF's group_norm) all call torch.std, whose
// default is the Bessel-corrected sample std (G−1), so that is the default here; population std (G) is
// an option. For G = 4 the two differ by √(4/3): sample std gives advantages ≈13% smaller. A group of
// one has std 0 under both (its advantage is 0: nothing to compare it with). All-equal groups give
// all-zero advantages (no learning signal; DAPO's FilterGroups drops them beforehand).
//
//	groups: [groups][G_g] rewards → [groups][G_g] advantages
func GRPO(groups [][]float64, cfg GRPOConfig) ([][]float64, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return perGroup(groups, 1, func(r, out []float64) {
		mu, ss := meanSS(r)
		n := float64(len(r))
		if cfg.Std == StdSample {
			n--
		}
		std := 0.0
		if n > 0 {
			std = math.Sqrt(ss / n)
		}
		for i, x := range r {
			out[i] = (x - mu) / (std + cfg.Eps)
		}
	})
}

// DrGRPO is Dr. GRPO's advantage (Liu et al. 2025, "Understanding R1-Zero-Like Training"):
//
//	A_i = r_i − mean(r)
//
// Dividing by std(r) weights prompts by how (un)certain the policy is on them (question-level
// difficulty bias), so Dr. GRPO drops it. Its other half, removing the 1/|y_i| length normalisation,
// lives in the loss aggregation (losscfg.AggSeqMeanTokenSumNorm).
//
//	groups: [groups][G_g] rewards → [groups][G_g] advantages
func DrGRPO(groups [][]float64) ([][]float64, error) {
	return perGroup(groups, 1, func(r, out []float64) {
		mu, _ := meanSS(r)
		for i, x := range r {
			out[i] = x - mu
		}
	})
}

// RLOO is the REINFORCE leave-one-out advantage (Ahmadian et al. 2024, "Back to Basics"; Kool et al.
// 2019): each sample's baseline is the mean reward of the other G−1 samples of its group,
//
//	A_i = r_i − (1/(G−1)) Σ_{j≠i} r_j = G/(G−1)·(r_i − mean(r))
//
// so the baseline is independent of the sample it scores (the estimator stays unbiased). A KL penalty,
// when used, is folded into r_i by the caller, as in the paper. Needs G ≥ 2.
//
//	groups: [groups][G_g ≥ 2] rewards → [groups][G_g] advantages
func RLOO(groups [][]float64) ([][]float64, error) {
	return perGroup(groups, 2, func(r, out []float64) {
		sum := 0.0
		for _, x := range r {
			sum += x
		}
		k := float64(len(r) - 1)
		for i, x := range r {
			out[i] = x - (sum-x)/k
		}
	})
}

// perGroup checks groups (at least minSize finite rewards each) and fills one output per group.
func perGroup(groups [][]float64, minSize int, fn func(r, out []float64)) ([][]float64, error) {
	out := make([][]float64, len(groups))
	for g, r := range groups {
		if len(r) < minSize {
			return nil, fmt.Errorf("advantage: group %d has %d samples: need at least %d", g, len(r), minSize)
		}
		for i, x := range r {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("advantage: group %d sample %d: reward %g is not finite", g, i, x)
			}
		}
		out[g] = make([]float64, len(r))
		fn(r, out[g])
	}
	return out, nil
}

// meanSS returns the mean of r and the sum of squared deviations from it (two passes, stable).
func meanSS(r []float64) (mu, ss float64) {
	for _, x := range r {
		mu += x
	}
	mu /= float64(len(r))
	for _, x := range r {
		ss += (x - mu) * (x - mu)
	}
	return mu, ss
}

// Flatten concatenates groups in order: the [batch] advantages a loss takes, when the batch lists
// each group's samples contiguously.
func Flatten(groups [][]float64) []float64 {
	var out []float64
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// Split cuts flat into consecutive groups of size groupSize (the inverse of Flatten for equal groups).
func Split(flat []float64, groupSize int) ([][]float64, error) {
	if groupSize <= 0 || len(flat)%groupSize != 0 {
		return nil, fmt.Errorf("advantage: split %d rewards into groups of %d: not a multiple", len(flat), groupSize)
	}
	out := make([][]float64, 0, len(flat)/groupSize)
	for i := 0; i < len(flat); i += groupSize {
		out = append(out, flat[i:i+groupSize:i+groupSize])
	}
	return out, nil
}
