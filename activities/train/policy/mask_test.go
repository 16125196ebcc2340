package policy

import (
	"math"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/loss"
	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/testbackend"
	"github.com/temperml/temper/algorithms/tokenize"
)

// episodeRollouts is one group of two samples: an agentic episode (a call of 3 policy tokens, a
// tool result of 4 tokens the policy did not write, an answer of 2 policy tokens) that passed, and a
// single-turn sample that failed.
func episodeRollouts() ([]rollout.Rollout, []float64, [][2]int) {
	prompt := []int{tokenize.ByteBOS, '7', '*', '6', '='}
	ep := rollout.Rollout{ID: "ep", Group: 0, PromptTokens: prompt,
		Tokens:   []int{'<', 'c', '>', '\n', '4', '2', '\n', '4', tokenize.ByteEOS},
		Policy:   []bool{true, true, true, false, false, false, false, true, true},
		LogProbs: []float32{-0.3, -0.2, -0.4, 0, 0, 0, 0, -0.6, -0.1}}
	single := rollout.Rollout{ID: "one", Group: 0, PromptTokens: prompt, Tokens: []int{'4', '1', tokenize.ByteEOS},
		LogProbs: []float32{-0.9, -0.7, -0.2}}
	// Token k of a rollout is predicted at row position len(prompt)+k-1; the tool span of the
	// episode is tokens 3..6.
	return []rollout.Rollout{ep, single}, []float64{1, 0}, [][2]int{{len(prompt) + 3 - 1, len(prompt) + 7 - 1}}
}

// TestEpisodeMaskGradient (issue 19, acceptance 1): for every GRPO-family algorithm and PPO, the
// policy loss built from an episode's rows has zero gradient with respect to the log-probability of
// every prompt, tool-result and padding token, checked numerically (central differences of the loss)
// and against autodiff; on the episode's policy tokens the gradient is not zero and, for the
// group-advantage algorithms, the same on every policy token (the episode's advantage applied to
// each).
func TestEpisodeMaskGradient(t *testing.T) {
	rs, rewards, tool := episodeRollouts()
	algos := []string{losscfg.AlgoGRPO, losscfg.AlgoDrGRPO, losscfg.AlgoDAPO, losscfg.AlgoGSPO, losscfg.AlgoRLOO, losscfg.AlgoReinforcePP, losscfg.AlgoPPO}
	for _, algo := range algos {
		t.Run(algo, func(t *testing.T) {
			cfg := losscfg.DefaultPolicyConfig(algo)
			adv := make([]float64, len(rs))
			var err error
			if algo != losscfg.AlgoPPO {
				if adv, err = advantages(algo, rs, rewards); err != nil {
					t.Fatal(err)
				}
			}
			rows := buildPolicyRows(rs, adv, []int{0, 1})
			n, seq := len(rs), rows.seq
			// The mask the trainer built: policy tokens only.
			ep := rs[0]
			for pos := range seq {
				k := pos + 1 - len(ep.PromptTokens)
				want := k >= 0 && k < len(ep.Tokens) && ep.Policy[k]
				if (rows.mask[0][pos] > 0) != want {
					t.Fatalf("mask[0][%d] = %g, want policy=%v", pos, rows.mask[0][pos], want)
				}
			}
			// old log-probs: the behaviour ones on trained tokens, arbitrary elsewhere (a masked
			// token's value must not matter).
			old := make([][]float32, n)
			for r := range old {
				old[r] = make([]float32, seq)
				for pos := range seq {
					old[r][pos] = rows.behaviour[r][pos]
					if rows.mask[r][pos] == 0 {
						old[r][pos] = -1.3 - 0.01*float32(pos)
					}
				}
			}
			advIn := tensors.FromFlatDataAndDimensions(rows.adv, n)
			var extra []*tensors.Tensor
			if algo == losscfg.AlgoPPO {
				vals := make([][]float32, n)
				for r := range vals {
					vals[r] = make([]float32, seq)
					for pos := range seq {
						vals[r][pos] = 0.1 * float32(pos%3)
					}
				}
				chunks := [][]int{{0, 1}}
				a, ret, _, err := ppoAdvantages([]policyRows{rows}, [][][]float32{old}, [][][]float32{old}, [][][]float32{vals}, chunks, nil, rewards, nil, trainapi.DefaultPPOConfig())
				if err != nil {
					t.Fatal(err)
				}
				for pos := tool[0][0]; pos < tool[0][1]; pos++ {
					if a[0][0][pos] != 0 {
						t.Fatalf("GAE advantage %g on tool token at %d", a[0][0][pos], pos)
					}
				}
				advIn = f32(a[0])
				extra = []*tensors.Tensor{f32(vals), f32(vals), f32(ret[0])}
			}
			exec, err := NewExec(testbackend.Sequential(), func(in []*Node) []*Node {
				pin := loss.PolicyInputs{Logp: in[0], OldLogp: in[1], Mask: in[2], Advantages: in[3]}
				if cfg.KLBeta > 0 {
					pin.RefLogp = in[1]
				}
				var l *Node
				if algo == losscfg.AlgoPPO {
					pin.Values, pin.OldValues, pin.Returns = in[4], in[5], in[6]
					pin.Entropy = ZerosLike(in[0])
					l, _ = objective.PPOLoss(cfg, pin)
				} else {
					l, _ = loss.PolicyLoss(cfg, pin)
				}
				return []*Node{l, Gradient(l, in[0])[0]}
			})
			if err != nil {
				t.Fatal(err)
			}
			run := func(logp [][]float32) (float64, [][]float32) {
				args := append([]any{f32(logp), f32(old), f32(rows.mask), advIn}, anys(extra)...)
				out, err := exec.Call(args...)
				if err != nil {
					t.Fatal(err)
				}
				g := tensors.MustCopyFlatData[float32](out[1])
				grad := make([][]float32, n)
				for r := range grad {
					grad[r] = g[r*seq : (r+1)*seq]
				}
				return float64(tensors.ToScalar[float32](out[0])), grad
			}
			_, grad := run(old)
			const eps = 5e-4 // small enough that GSPO's sequence ratio stays inside its clip range (3e-4 and 4e-4)
			var policyGrads []float64
			for r := range n {
				for pos := range seq {
					plus, minus := clone(old), clone(old)
					plus[r][pos] += eps
					minus[r][pos] -= eps
					lp, _ := run(plus)
					lm, _ := run(minus)
					fd := (lp - lm) / (2 * eps)
					g := float64(grad[r][pos])
					if rows.mask[r][pos] == 0 {
						if lp != lm || g != 0 {
							t.Errorf("row %d position %d (prompt, tool or padding): loss moved by %g, autodiff %g; want exactly 0", r, pos, lp-lm, g)
						}
						continue
					}
					if math.Abs(fd-g) > 2e-3+0.02*math.Abs(g) {
						t.Errorf("row %d position %d: central difference %g, autodiff %g", r, pos, fd, g)
					}
					if r == 0 {
						policyGrads = append(policyGrads, g)
					}
				}
			}
			if len(policyGrads) != 5 {
				t.Fatalf("%d policy tokens in the episode's row, want 5", len(policyGrads))
			}
			for _, g := range policyGrads {
				if g == 0 {
					t.Fatalf("zero gradient on a policy token: %v", policyGrads)
				}
				if algo != losscfg.AlgoPPO && math.Abs(g-policyGrads[0]) > 1e-6 {
					t.Fatalf("policy tokens' gradients differ: %v (one advantage per episode)", policyGrads)
				}
			}
		})
	}
}

func f32(x [][]float32) *tensors.Tensor {
	flat := make([]float32, 0, len(x)*len(x[0]))
	for _, r := range x {
		flat = append(flat, r...)
	}
	return tensors.FromFlatDataAndDimensions(flat, len(x), len(x[0]))
}

func clone(x [][]float32) [][]float32 {
	out := make([][]float32, len(x))
	for i := range x {
		out[i] = append([]float32(nil), x[i]...)
	}
	return out
}

func anys(ts []*tensors.Tensor) []any {
	out := make([]any, len(ts))
	for i, t := range ts {
		out[i] = t
	}
	return out
}
