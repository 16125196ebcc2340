package loss

import (
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive

	"github.com/temperml/temper/algorithms/loss/losscfg"
)

// ValueLoss is PPO's clipped critic loss per token (as in OpenAI baselines and verl):
//
//	V^clip_t = clip(V_t, V^old_t − ε_v, V^old_t + ε_v)
//	ℓ_t      = ½·max((V_t − R_t)², (V^clip_t − R_t)²)
//
// The clipped term keeps the critic from moving far from the values the advantages were computed
// with; taking the max makes it pessimistic (no gradient once V_t has moved past the clip range in
// the direction the clip would help). clipEps ≤ 0: ℓ_t = ½(V_t − R_t)².
//
//	values, oldValues, returns, mask: [batch, seq] → perToken: [batch, seq] (unmasked; Aggregate it)
//
// oldValues and returns are constants. Metrics: value_clip_frac (token-mean of "the clipped term is
// strictly larger").
func ValueLoss(values, oldValues, returns, mask *Node, clipEps float64) (perToken *Node, m Metrics) {
	checkSame("ValueLoss", values, oldValues)
	checkSame("ValueLoss", values, returns)
	checkSame("ValueLoss", values, mask)
	old, ret := StopGradient(oldValues), StopGradient(returns)
	unclipped := Square(Sub(values, ret))
	w := AsWeights(mask, values)
	if clipEps <= 0 {
		return MulScalar(unclipped, 0.5), Metrics{"value_clip_frac": ZerosLike(ReduceAllSum(w))}
	}
	clipped := Add(old, ClipScalar(Sub(values, old), -clipEps, clipEps))
	clippedSq := Square(Sub(clipped, ret))
	perToken = MulScalar(Max(unclipped, clippedSq), 0.5)
	frac := tokenMean(ConvertDType(GreaterThan(clippedSq, unclipped), values.DType()), w)
	return perToken, Metrics{"value_clip_frac": StopGradient(frac)}
}

// EntropyBonus is −coef·Aggregate(entropy): add it to a loss to reward a policy for keeping its
// entropy (exploration); the trainer supplies entropy per token (e.g. model.Entropy of the logits).
//
//	entropy, mask: [batch, seq] → scalar
func EntropyBonus(entropy, mask *Node, coef float64, mode losscfg.AggMode, maxLen int) *Node {
	return MulScalar(Aggregate(entropy, mask, mode, maxLen), -coef)
}
