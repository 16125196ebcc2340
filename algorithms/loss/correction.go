package loss

import (
	"math"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/support/exceptions"

	"github.com/temperml/temper/algorithms/loss/losscfg"
)

// Metrics of OffPolicyCorrection for modes mis, geo_mask and icepop (tis keeps TISWeights' names,
// tis_truncated_frac and tis_weight_mean). Every one is measured over the mask before correction, so
// that a mode masking tokens does not hide them from its own statistics.
const (
	// MetricCorrWeightMean is the token-mean of the weight the policy-gradient term gets (0 where
	// masked, 1 where a kept token of geo_mask).
	MetricCorrWeightMean = "corr_weight_mean"
	// MetricCorrMaskedFrac is the fraction of tokens whose policy gradient the correction drops.
	MetricCorrMaskedFrac = "corr_masked_frac"
	// MetricCorrLowFrac and MetricCorrHighFrac are the fractions of tokens whose ratio (geo_mask: whose
	// sequence's geometric-mean ratio) is below low or above high.
	MetricCorrLowFrac  = "corr_low_frac"
	MetricCorrHighFrac = "corr_high_frac"
	// MetricCorrSeqMaskedFrac is the fraction of sequences (with a counted token) with a dropped token.
	MetricCorrSeqMaskedFrac = "corr_seq_masked_frac"
)

// CorrectionMetrics lists every metric name OffPolicyCorrection can report (tis's first), in a fixed
// order for an objective's metric list.
var CorrectionMetrics = []string{"tis_truncated_frac", "tis_weight_mean", MetricCorrWeightMean,
	MetricCorrMaskedFrac, MetricCorrLowFrac, MetricCorrHighFrac, MetricCorrSeqMaskedFrac}

// OffPolicyCorrection corrects the policy-gradient term for rollouts that π_old (the trainer's
// log-probs before this step's updates) did not sample. With ρ_t = π_old(y_t)/π_behaviour(y_t) and
// [L, H] = [c.Low, c.High] after defaults (losscfg.DefaultCorrectionBounds):
//
//	tis       w_t = min(ρ_t, H)                    keep_t = m_t
//	mis       w_t = ρ_t·[ρ_t ∈ [L, H]]             keep_t = m_t·[ρ_t ∈ [L, H]]
//	geo_mask  w   = nil (1)                        keep_t = m_t·[ḡ_i ∈ [L, H]],  ḡ_i = exp(Σ_t m_it log ρ_it / Σ_t m_it)
//	icepop    w_t = ρ_t·[ρ_t ∈ [L, H]]             keep_t = m_t
//	none      w   = nil (1)                        keep_t = m_t
//
// The caller multiplies the per-token policy-gradient loss by w (a constant: StopGradient, since the
// weight changes the measure the gradient is estimated under and is not itself optimised) and
// aggregates every term of the loss under keep. Sources:
//
//   - tis: token-level truncated IS, Yao et al. 2025, "Your Efficient RL Framework Secretly Brings You
//     Off-Policy RL Training" (fengyao.notion.site/off-policy-rl); computed by TISWeights.
//   - mis: token-level masked IS as verl's rollout correction composes it (docs/algo/rollout_corr.md,
//     rollout_corr_math.md §3.3.1 and §3.5: rollout_is="token" weights with rollout_rs="token_k1"
//     bounds) and slime's MIS (examples/train_infer_mismatch_helper, tis_mode "mask"): rejected tokens
//     leave the loss mask, so they count in no denominator (slime PR #657 fixed exactly that). Liu, Li et
//     al. 2025, "When Speed Kills Stability", motivate rejecting over truncating.
//   - geo_mask: verl's geometric-mean rejection (Geo-RS, rollout_corr_math.md §3.3.3, rollout_rs=
//     "seq_mean_k1"): the sequence is judged by its average per-token log-ratio, so the test does not
//     tighten with length as a product of ratios would; no IS weight.
//   - icepop: IcePop (Ring-1T report, arXiv 2510.18855, eq. for J_IcePop): the policy gradient of
//     token t is multiplied by M(ρ_t) = ρ_t if ρ_t ∈ [α, β] else 0, and the objective keeps its
//     1/Σ|y_i| normalisation, so a masked token stays in the denominators (as slime's
//     icepop_function and prime-rl's IcePop loss do).
//
// log ρ is clamped to [−20, 20] before exp (verl's SAFETY_BOUND) and the bounds are tested on the log
// side, so extreme ratios stay finite. A row without a counted token is never kept.
//
//	oldLogp, behaviourLogp, mask: [batch, seq] → w: [batch, seq] or nil; keep: [batch, seq] in
//	oldLogp's dtype. Metrics: tis's (TISWeights) or the Corr* ones above. Panics on an invalid c or
//	mismatched shapes.
func OffPolicyCorrection(oldLogp, behaviourLogp, mask *Node, c losscfg.Correction) (w, keep *Node, m Metrics) {
	checkSame("OffPolicyCorrection", oldLogp, behaviourLogp)
	checkSame("OffPolicyCorrection", oldLogp, mask)
	if err := c.Validate(); err != nil {
		panic(err)
	}
	c = c.WithDefaults()
	mw := AsWeights(mask, oldLogp)
	switch c.Mode {
	case losscfg.CorrectionNone:
		return nil, mw, Metrics{}
	case losscfg.CorrectionTIS:
		w, m = TISWeights(oldLogp, behaviourLogp, mask, c.High)
		return w, mw, m
	}
	g, dt := oldLogp.Graph(), oldLogp.DType()
	logRatio := ClipScalar(StopGradient(Sub(oldLogp, behaviourLogp)), -maxLogRatio, maxLogRatio)
	lnLow, lnHigh := Scalar(g, dt, math.Log(c.Low)), Scalar(g, dt, math.Log(c.High))
	var judged *Node // the log-ratio tested against the bounds, [batch, seq]
	switch c.Mode {
	case losscfg.CorrectionMIS, losscfg.CorrectionIcePop:
		judged = logRatio
	case losscfg.CorrectionGeoMask:
		judged = BroadcastToDims(ExpandAxes(SeqMean(logRatio, mw), -1), logRatio.Shape().Dimensions...)
	default:
		exceptions.Panicf("loss: OffPolicyCorrection: mode %q has no graph", c.Mode)
	}
	below, above := LessThan(judged, lnLow), GreaterThan(judged, lnHigh)
	inside := LogicalNot(LogicalOr(below, above))
	ones, zeros := OnesLike(logRatio), ZerosLike(logRatio)
	in01 := Where(inside, ones, zeros)
	effective := in01 // the weight the policy gradient of a counted token gets
	keep = mw
	switch c.Mode {
	case losscfg.CorrectionMIS, losscfg.CorrectionIcePop:
		w = Where(inside, Exp(logRatio), zeros)
		effective = w
		if c.Mode == losscfg.CorrectionMIS {
			keep = Mul(mw, in01) // rejected: out of every denominator
		}
	case losscfg.CorrectionGeoMask:
		keep = Mul(mw, in01)
	}
	dropped := Sub(ones, in01)
	droppedRow := ConvertDType(GreaterThan(ReduceSum(Mul(dropped, mw), -1), ScalarZero(g, dt)), dt)
	m = Metrics{
		MetricCorrWeightMean:    tokenMean(effective, mw),
		MetricCorrMaskedFrac:    tokenMean(dropped, mw),
		MetricCorrLowFrac:       tokenMean(Where(below, ones, zeros), mw),
		MetricCorrHighFrac:      tokenMean(Where(above, ones, zeros), mw),
		MetricCorrSeqMaskedFrac: rowMean(droppedRow, mw),
	}
	for k, v := range m {
		m[k] = StopGradient(v)
	}
	return w, keep, m
}
