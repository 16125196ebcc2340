package advantage

import (
	"math"
	"strings"
	"testing"
)

func TestTokenRewards(t *testing.T) {
	mask := [][]bool{{true, true, false}, {false, true, true}, {false, false, false}}
	kl := [][]float64{{0.1, 0.2, 9}, {9, 0.3, 0.4}, {9, 9, 9}}
	got, err := TokenRewards([]float64{1, 2, 5}, mask, kl, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	checkGroups(t, "token rewards", got, [][]float64{{-0.05, 1 - 0.1, 0}, {0, -0.15, 2 - 0.2}, {0, 0, 0}})
	got, err = TokenRewards([]float64{1, 2, 5}, mask, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkGroups(t, "token rewards β=0", got, [][]float64{{0, 1, 0}, {0, 0, 2}, {0, 0, 0}})
	if _, err := TokenRewards([]float64{1, 2, 5}, mask, nil, 0.1); err == nil || !strings.Contains(err.Error(), "kl has 0 rows") {
		t.Errorf("missing kl: %v", err)
	}
}

// refGAE computes A_t = Σ_l (γλ)^l δ_{t+l} directly (the sum, not the recursion) over the counted tokens.
func refGAE(r, v []float64, mask []bool, gamma, lambda float64) (adv, ret []float64) {
	var idx []int
	for t, on := range mask {
		if on {
			idx = append(idx, t)
		}
	}
	delta := make([]float64, len(idx))
	for k, t := range idx {
		next := 0.0
		if k+1 < len(idx) {
			next = v[idx[k+1]]
		}
		delta[k] = r[t] + gamma*next - v[t]
	}
	adv, ret = make([]float64, len(mask)), make([]float64, len(mask))
	for k, t := range idx {
		for l := 0; k+l < len(idx); l++ {
			adv[t] += math.Pow(gamma*lambda, float64(l)) * delta[k+l]
		}
		ret[t] = adv[t] + v[t]
	}
	return adv, ret
}

func TestGAEHandComputed(t *testing.T) {
	// γ = λ = 1: A_t = reward-to-go − V_t; returns = reward-to-go.
	rewards := [][]float64{{0, 0, 1}, {0.5, 9, 2}}
	values := [][]float64{{0.5, 0.6, 0.7}, {0.1, 9, 0.3}}
	mask := [][]bool{{true, true, true}, {true, false, true}}
	adv, ret, err := GAE(rewards, values, mask, GAEConfig{Gamma: 1, Lambda: 1})
	if err != nil {
		t.Fatal(err)
	}
	checkGroups(t, "adv", adv, [][]float64{{0.5, 0.4, 0.3}, {2.5 - 0.1, 0, 2 - 0.3}})
	checkGroups(t, "returns", ret, [][]float64{{1, 1, 1}, {2.5, 0, 2}})
	// λ = 0: one-step TD errors δ_t = r_t + γV_{t+1} − V_t, with γ = 0.9.
	adv, _, err = GAE(rewards, values, mask, GAEConfig{Gamma: 0.9, Lambda: 0})
	if err != nil {
		t.Fatal(err)
	}
	checkGroups(t, "td", adv, [][]float64{{0.9*0.6 - 0.5, 0.9*0.7 - 0.6, 1 - 0.7}, {0.5 + 0.9*0.3 - 0.1, 0, 2 - 0.3}})
}

func TestGAEMatchesReference(t *testing.T) {
	rewards := [][]float64{{0.1, -0.2, 0.05, 1, 7}, {0, 0, 0, 0, -1}, {0.3, 7, 0.2, 7, 0.5}, {7, 7, 7, 7, 7}}
	values := [][]float64{{0.2, 0.1, 0.4, 0.3, 7}, {0.5, -0.5, 0.25, 0, 1}, {0.9, 7, 0.1, 7, 0.2}, {7, 7, 7, 7, 7}}
	mask := [][]bool{{true, true, true, true, false}, {true, true, true, true, true}, {true, false, true, false, true}, {false, false, false, false, false}}
	for _, gl := range [][2]float64{{1, 1}, {1, 0.95}, {0.99, 0.9}, {0.5, 0}} {
		cfg := GAEConfig{Gamma: gl[0], Lambda: gl[1]}
		adv, ret, err := GAE(rewards, values, mask, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var wantA, wantR [][]float64
		for i := range mask {
			a, r := refGAE(rewards[i], values[i], mask[i], gl[0], gl[1])
			wantA, wantR = append(wantA, a), append(wantR, r)
		}
		checkGroups(t, "gae adv", adv, wantA)
		checkGroups(t, "gae returns", ret, wantR)

		cfg.Whiten = true
		wadv, wret, err := GAE(rewards, values, mask, cfg)
		if err != nil {
			t.Fatal(err)
		}
		checkGroups(t, "returns not whitened", wret, wantR)
		checkWhitened(t, wadv, wantA, mask)
	}
}

// checkWhitened: got = (want − μ)/σ over counted tokens (population σ), 0 elsewhere.
func checkWhitened(t *testing.T, got, raw [][]float64, mask [][]bool) {
	t.Helper()
	var xs []float64
	for i := range mask {
		for j, on := range mask[i] {
			if on {
				xs = append(xs, raw[i][j])
			}
		}
	}
	mu, v := 0.0, 0.0
	for _, x := range xs {
		mu += x / float64(len(xs))
	}
	for _, x := range xs {
		v += (x - mu) * (x - mu) / float64(len(xs))
	}
	want := make([][]float64, len(mask))
	for i := range mask {
		want[i] = make([]float64, len(mask[i]))
		for j, on := range mask[i] {
			if on {
				want[i][j] = (raw[i][j] - mu) / (math.Sqrt(v) + 1e-8)
			}
		}
	}
	checkGroups(t, "whitened", got, want)
}

func TestReinforcePP(t *testing.T) {
	// β = 0, γ = 1: every token carries its row's reward; z-score over the 3 counted tokens:
	// G = [1, 1, 0], μ = ⅔, σ = √(2/9) → A = [1/√2, 1/√2, −√2].
	mask := [][]bool{{true, true}, {true, false}}
	adv, err := ReinforcePP([]float64{1, 0}, mask, nil, DefaultReinforcePPConfig())
	if err != nil {
		t.Fatal(err)
	}
	s := math.Sqrt(2.0 / 9)
	checkGroups(t, "reinforce++", adv, [][]float64{{(1.0 / 3) / (s + 1e-8), (1.0 / 3) / (s + 1e-8)}, {(-2.0 / 3) / (s + 1e-8), 0}})
	if math.Abs(adv[1][0]+math.Sqrt2) > 1e-6 {
		t.Errorf("reinforce++ [1][0] = %g, want −√2", adv[1][0])
	}

	// With a KL penalty and γ < 1: returns-to-go of TokenRewards, then the batch z-score.
	rewards := []float64{1, -0.5, 0.25}
	mask = [][]bool{{true, true, true, false}, {false, true, true, true}, {true, false, true, true}}
	kl := [][]float64{{0.1, -0.05, 0.2, 9}, {9, 0.3, 0.1, 0}, {0.05, 9, -0.1, 0.02}}
	cfg := ReinforcePPConfig{Gamma: 0.9, KLBeta: 0.2, Eps: 1e-8}
	adv, err = ReinforcePP(rewards, mask, kl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw := make([][]float64, len(mask))
	for i := range mask {
		raw[i] = make([]float64, len(mask[i]))
		last := 0
		for j, on := range mask[i] {
			if on {
				last = j
			}
		}
		for j := range mask[i] {
			if !mask[i][j] {
				continue
			}
			// G_j = Σ_{k ≥ j counted} γ^(#counted tokens between) r_k
			p := 0.0
			for k := j; k < len(mask[i]); k++ {
				if !mask[i][k] {
					continue
				}
				r := -cfg.KLBeta * kl[i][k]
				if k == last {
					r += rewards[i]
				}
				raw[i][j] += math.Pow(cfg.Gamma, p) * r
				p++
			}
		}
	}
	checkWhitened(t, adv, raw, mask)
}

func TestTokenConfigsValidate(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{GAEConfig{Gamma: 1.1, Lambda: 1}.Validate(), "gamma="},
		{GAEConfig{Gamma: 1, Lambda: math.NaN()}.Validate(), "lambda="},
		{ReinforcePPConfig{Gamma: -1, Eps: 1}.Validate(), "gamma="},
		{ReinforcePPConfig{Gamma: 1, KLBeta: -1, Eps: 1}.Validate(), "kl_beta="},
		{ReinforcePPConfig{Gamma: 1}.Validate(), "eps="},
	}
	for _, c := range cases {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("error %v, want %q", c.err, c.want)
		}
	}
	for _, err := range []error{DefaultGAEConfig().Validate(), DefaultReinforcePPConfig().Validate(), DefaultGRPOConfig().Validate(), DefaultOverlongConfig().Validate()} {
		if err != nil {
			t.Errorf("default config invalid: %v", err)
		}
	}
	if _, _, err := GAE([][]float64{{1}}, [][]float64{{1, 2}}, [][]bool{{true}}, DefaultGAEConfig()); err == nil || !strings.Contains(err.Error(), "values row 0") {
		t.Errorf("shape mismatch: %v", err)
	}
}
