package objective

import (
	"fmt"
	"slices"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/loss"
	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/algorithms/model"
)

// PolicyMetrics are the metrics Policy reports (those loss.PolicyLoss does not compute report 0,
// except entropy, which is always measured: the completion tokens' mean entropy, aggregated as the loss).
// They end with the off-policy correction's (loss.CorrectionMetrics, 0 for a mode that does not report
// them) and the train–inference mismatch of π_old against the behaviour log-probs of the batch
// (loss.MismatchNames(loss.MismatchPrefix)), measured in every step.
var PolicyMetrics = withCorrection([]string{"pg_loss", "kl", "clip_frac_low", "clip_frac_high", "approx_kl", "ratio_mean",
	"tis_truncated_frac", "entropy", "tokens"})

// withCorrection is names followed by the correction's and the mismatch's metric names it lacks.
func withCorrection(names []string) []string {
	out := slices.Clone(names)
	for _, k := range append(slices.Clone(loss.CorrectionMetrics), loss.MismatchNames(loss.MismatchPrefix)...) {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// nameOf is the part of a policy objective's name its loss config decides: every hyperparameter the
// graph bakes in, the correction in its canonical form (two corrections must not share an executable).
func nameOf(cfg losscfg.PolicyConfig) string {
	return fmt.Sprintf("clip=%g/%g dual=%g kl=%g/%s agg=%s max=%d corr=%s ent=%g", cfg.ClipLow, cfg.ClipHigh, cfg.DualClip,
		cfg.KLBeta, cfg.KLEstimator, cfg.Aggregation, cfg.MaxLen, cfg.EffectiveCorrection(), cfg.EntropyCoef)
}

// Policy is the policy-gradient objective of RL (GRPO family, RLOO, REINFORCE++; no critic). Its
// input is a PolicyBatch: the rows (prompt+completion aligned for next-token prediction) with the old,
// behaviour and reference log-probs of their targets, and each row's sequence-level advantage.
func Policy(cfg losscfg.PolicyConfig) Objective { return PolicyWith(cfg, PolicyOptions{}) }

// PolicyOptions are the ways a policy objective can be built for one step's shapes.
type PolicyOptions struct {
	// OnPolicy is for a step whose old policy is the one being trained (one epoch of one minibatch):
	// the batch's Old is ignored and log π_old is StopGradient(log π_θ) in the graph (ratio 1, no clipping),
	// what a separate recomputation gave up to rounding, without that forward pass.
	OnPolicy bool
	// Window > 0 reads the batch's completion columns (PolicyBatch.Cols, with the same Window). The LM head, log-probs and entropy are computed at those
	// columns only; every [rows, seq] float input is read there. A completion is a few positions of
	// a row that also holds its prompt, and the head over the 264-token vocabulary (its one-hot, log-
	// sum-exp and entropy) was a large part of a policy step's work at every position. Every masked
	// column must be in cols: the objective cannot see one that is not.
	Window int
}

// PolicyWith is Policy built with o.
func PolicyWith(cfg losscfg.PolicyConfig, o PolicyOptions) Objective {
	name := "policy"
	if o.OnPolicy {
		name = "policy-onpolicy"
	}
	if o.Window > 0 {
		name += fmt.Sprintf("-window%d", o.Window)
	}
	return Objective{
		Name:    fmt.Sprintf("%s[%s %s]", name, cfg.Algorithm, nameOf(cfg)),
		Metrics: PolicyMetrics,
		Build: func(scope *gm.Scope, mc model.Config, in []*Node) (*Node, map[string]*Node) {
			b := policyIn(name, in, o.Window > 0)
			targets, mask, old, behaviour, ref := b.targets, b.mask, b.old, b.behaviour, b.ref
			hidden := model.Hidden(scope, mc, b.tokens, b.positions, b.valid)
			maxLen := cfg.MaxLen
			if o.Window > 0 {
				if maxLen <= 0 { // seq-mean-token-sum-norm's default divisor: the row length, not the window
					maxLen = b.tokens.Shape().Dim(1)
				}
				at := windowAt(b.cols, o.Window)
				hidden = Gather(hidden, at.idx) // [rows, window, d]
				targets = Gather(targets, at.idx)
				mask = Mul(Gather(mask, at.idx), at.present)
				old, behaviour, ref = Gather(old, at.idx), Gather(behaviour, at.idx), Gather(ref, at.idx)
			}
			cfg := cfg
			cfg.MaxLen = maxLen
			logits := model.LMHead(scope, mc, hidden)
			logp := model.TokenLogProbs(logits, targets)
			// The behaviour log-probs are always read: the correction needs them when on, and the
			// mismatch metrics are measured in every step.
			pin := loss.PolicyInputs{Logp: logp, OldLogp: old, BehaviourLogp: behaviour, Advantages: b.adv, Mask: mask}
			if o.OnPolicy {
				pin.OldLogp = nil // loss.PolicyLoss: StopGradient(logp)
			}
			if cfg.KLBeta > 0 {
				pin.RefLogp = ref
			}
			entropy := model.Entropy(logits)
			if cfg.EntropyCoef != 0 {
				pin.Entropy = entropy
			}
			l, m := loss.PolicyLoss(cfg, pin)
			out := map[string]*Node(m)
			out["tokens"] = ReduceAllSum(mask)
			if _, ok := out["entropy"]; !ok {
				// Measured without a bonus too: a collapsing or spreading policy is what an RL run's
				// entropy curve is watched for, and 0 would read as a collapsed one.
				out["entropy"] = StopGradient(loss.Aggregate(entropy, mask, cfg.Aggregation, cfg.MaxLen))
			}
			return l, out
		},
	}
}

// window is where a policy objective reads a row's completion: Gather indices [rows, window, 2]
// (row, column) and present [rows, window] float32, 0 where cols is −1.
type window struct{ idx, present *Node }

func windowAt(cols *Node, n int) window {
	if cols.Rank() != 2 || cols.Shape().Dim(1) != n || cols.DType() != dtypes.Int32 {
		panic(fmt.Sprintf("objective policy: cols %s: want [rows, %d] int32", cols.Shape(), n))
	}
	g, rows := cols.Graph(), cols.Shape().Dim(0)
	zero := ScalarZero(g, dtypes.Int32)
	row := Iota(g, shapes.Make(dtypes.Int32, rows, n, 1), 0)
	col := Reshape(Max(cols, zero), rows, n, 1)
	present := ConvertDType(GreaterOrEqual(cols, zero), dtypes.Float32)
	return window{idx: Concatenate([]*Node{row, col}, -1), present: present}
}
