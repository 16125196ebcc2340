package loss

import (
	"fmt"
	"math"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive

	"github.com/temperml/temper/algorithms/loss/losscfg"
)

// legacyPolicyLoss is PolicyLoss as it was before the correction block and CISPO (commit 1f0b9e4),
// kept verbatim but for the input checks it shares with PolicyLoss (policyInputs), so that
// TestPolicyLossBitIdenticalToLegacy can hold the existing algorithms and the tis_threshold path to
// the bit.
func legacyPolicyLoss(cfg losscfg.PolicyConfig, in PolicyInputs) (*Node, Metrics) {
	oldLogp := policyInputs(cfg, in)
	agg := func(x *Node) *Node { return Aggregate(x, in.Mask, cfg.Aggregation, cfg.MaxLen) }

	var perToken *Node
	var m Metrics
	if cfg.Algorithm == losscfg.AlgoGSPO {
		perToken, m = GSPOSurrogate(in.Logp, oldLogp, in.Advantages, in.Mask, cfg.ClipLow, cfg.ClipHigh)
	} else {
		perToken, m = ClippedSurrogate(in.Logp, oldLogp, in.Advantages, in.Mask, cfg.ClipLow, cfg.ClipHigh, cfg.DualClip)
	}
	if cfg.TISThreshold > 0 {
		need(in.BehaviourLogp, "BehaviourLogp", "tis_threshold > 0")
		w, tm := TISWeights(oldLogp, in.BehaviourLogp, in.Mask, cfg.TISThreshold)
		perToken = Mul(perToken, w)
		for k, v := range tm {
			m[k] = v
		}
	}
	m["pg_loss"] = agg(perToken)
	if cfg.KLBeta > 0 {
		need(in.RefLogp, "RefLogp", "kl_beta > 0")
		kl := KLPenalty(in.Logp, in.RefLogp, losscfg.KLEstimator(cfg.KLEstimator))
		perToken = Add(perToken, MulScalar(kl, cfg.KLBeta))
		m["kl"] = tokenMean(StopGradient(kl), in.Mask)
	}
	loss := agg(perToken)
	if cfg.EntropyCoef != 0 {
		need(in.Entropy, "Entropy", "entropy_coef ≠ 0")
		loss = Add(loss, EntropyBonus(in.Entropy, in.Mask, cfg.EntropyCoef, cfg.Aggregation, cfg.MaxLen))
		m["entropy"] = StopGradient(agg(in.Entropy))
	}
	if cfg.ValueCoef > 0 {
		need(in.Values, "Values", "value_coef > 0")
		need(in.OldValues, "OldValues", "value_coef > 0")
		need(in.Returns, "Returns", "value_coef > 0")
		vl, vm := ValueLoss(in.Values, in.OldValues, in.Returns, in.Mask, cfg.ValueClip)
		v := agg(vl)
		loss = Add(loss, MulScalar(v, cfg.ValueCoef))
		m["value_loss"] = StopGradient(v)
		for k, x := range vm {
			m[k] = x
		}
	}
	m["loss"] = StopGradient(loss)
	m["pg_loss"] = StopGradient(m["pg_loss"])
	return loss, m
}

// TestPolicyLossBitIdenticalToLegacy: every existing algorithm, with and without tis_threshold (and
// tis_threshold against the explicit correction {tis, high}), gives the legacy loss, gradients and
// metrics to the bit.
func TestPolicyLossBitIdenticalToLegacy(t *testing.T) {
	cases := map[string]losscfg.PolicyConfig{}
	for _, algo := range losscfg.Algorithms {
		if algo == losscfg.AlgoCISPO {
			continue // new
		}
		cases[algo] = losscfg.DefaultPolicyConfig(algo)
		c := losscfg.DefaultPolicyConfig(algo)
		c.TISThreshold = 1.5
		c.EntropyCoef = 0.01
		cases[algo+"-tis"] = c
	}
	explicit := losscfg.DefaultPolicyConfig(losscfg.AlgoGRPO)
	explicit.Correction = losscfg.Correction{Mode: losscfg.CorrectionTIS, High: 1.5}
	explicit.EntropyCoef = 0.01
	build := func(f func(losscfg.PolicyConfig, PolicyInputs) (*Node, Metrics), cfg losscfg.PolicyConfig, keys *[]string) func(in []*Node) []*Node {
		return func(in []*Node) []*Node {
			pin := PolicyInputs{Logp: in[0], OldLogp: in[1], BehaviourLogp: in[2], RefLogp: in[3],
				Advantages: in[4], Mask: in[5], Entropy: in[6], Values: in[7], OldValues: in[8], Returns: in[9]}
			loss, m := f(cfg, pin)
			res := []*Node{loss}
			res = append(res, Gradient(loss, in[0], in[7])...)
			if *keys == nil {
				*keys = pgSortedKeys(m)
			}
			for _, k := range *keys {
				x, ok := m[k]
				if !ok { // a metric the legacy loss reported is missing: NaN fails the comparison
					x = Scalar(loss.Graph(), loss.DType(), math.NaN())
				}
				res = append(res, x)
			}
			return res
		}
	}
	for name, cfg := range cases {
		for _, adv := range []any{pgAdvSeq, pgAdvTok} {
			label := fmt.Sprintf("%s/%T", name, adv)
			var keys []string
			args := []any{pgLogp, pgOld, pgBeh, pgRef, adv, pgMask, pgEnt, pgVal, pgOldVal, pgRet}
			want := pgExec(t, build(legacyPolicyLoss, cfg, &keys), args...)
			got := pgExec(t, build(PolicyLoss, cfg, &keys), args...)
			if cfg.TISThreshold > 0 && name == losscfg.AlgoGRPO+"-tis" {
				gotExplicit := pgExec(t, build(PolicyLoss, explicit, &keys), args...)
				checkBits(t, label+" explicit correction", gotExplicit, want, keys)
			}
			checkBits(t, label, got, want, keys)
		}
	}
}

// checkBits compares outputs (loss, two gradients, then metrics by key) bit for bit.
func checkBits(t *testing.T, label string, got, want [][]float32, keys []string) {
	t.Helper()
	names := append([]string{"loss", "dloss/dlogp", "dloss/dvalues"}, keys...)
	for i := range want {
		for j := range want[i] {
			if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
				t.Errorf("%s: %s[%d] = %v, legacy %v", label, names[i], j, got[i][j], want[i][j])
			}
		}
	}
}
