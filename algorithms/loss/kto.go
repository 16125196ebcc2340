package loss

import (
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/support/exceptions"
)

// KTOBatch holds unpaired, labelled completions for KTO, plus the mismatched pairs that estimate its
// reference point.
//
//	LogProbs, RefLogProbs, Mask:        [batch, seq]  per-token log-probs of completion y_i for prompt
//	                                    x_i under πθ and πref, and 1 on counted completion tokens
//	Desirable:                          [batch]  Bool, or numeric 1 (desirable) / 0 (undesirable)
//	KLLogProbs, KLRefLogProbs, KLMask:  [batchKL, seqKL]  the same for mismatched pairs (x_i, y_j), j ≠ i
//	                                    (e.g. completions shifted by one row), used only for z0
//
// Masks are Bool or numeric. Rows with an empty Mask (or KLMask) are padding and are not counted.
type KTOBatch struct {
	LogProbs, RefLogProbs, Mask       *Node
	Desirable                         *Node
	KLLogProbs, KLRefLogProbs, KLMask *Node
}

// KTO is Kahneman–Tversky Optimization (Ethayarajh et al. 2024, "KTO: Model Alignment as Prospect
// Theoretic Optimization"), which learns from single completions labelled desirable or undesirable:
//
//	r(x,y) = log πθ(y|x) − log πref(y|x)                         (per-sequence sums)
//	z0     = max(0, mean over mismatched pairs (x_i, y_j≠i) of r(x_i, y_j))   (treated as a constant)
//	loss_i = λD·(1 − σ(β·(r_i − z0)))   if y_i is desirable
//	         λU·(1 − σ(β·(z0 − r_i)))   if y_i is undesirable
//	loss   = mean over rows of loss_i
//
// z0 is the paper's biased estimate of KL(πθ‖πref) from mismatched pairs; like the paper and TRL it
// carries no gradient (StopGradient), so only the labelled rows are trained. Desirable rows push r up,
// undesirable rows push it down.
//
// λD and λU default to 1 (Preference). The paper advises λD·n_D / (λU·n_U) ∈ [1, 4/3], with n_D and n_U
// the numbers of desirable and undesirable examples: with a 1:4 desirable:undesirable imbalance, for
// example, raise λD to about 4–5.3 (or lower λU).
//
// β > 0 (default 0.1). Returns the scalar loss and the metrics
//
//	rewards/chosen    mean β·r over desirable rows (0 when there are none)
//	rewards/rejected  mean β·r over undesirable rows
//	rewards/margin    rewards/chosen − rewards/rejected
//	kl                z0, the clamped KL estimate used as the reference point
func KTO(b KTOBatch, beta, desirableWeight, undesirableWeight float64) (*Node, Metrics) {
	if b.LogProbs == nil || b.RefLogProbs == nil || b.Mask == nil || b.Desirable == nil ||
		b.KLLogProbs == nil || b.KLRefLogProbs == nil || b.KLMask == nil {
		exceptions.Panicf("loss: KTO: every field of KTOBatch is required")
	}
	if b.LogProbs.Rank() != 2 || b.KLLogProbs.Rank() != 2 {
		exceptions.Panicf("loss: KTO: want [batch, seq] log-probs, got %s and KL %s", b.LogProbs.Shape(), b.KLLogProbs.Shape())
	}
	checkSame("KTO log-probs/mask", b.LogProbs, b.Mask)
	checkSame("KTO log-probs/reference", b.LogProbs, b.RefLogProbs)
	checkSame("KTO KL log-probs/mask", b.KLLogProbs, b.KLMask)
	checkSame("KTO KL log-probs/reference", b.KLLogProbs, b.KLRefLogProbs)
	if b.Desirable.Rank() != 1 || b.Desirable.Shape().Dim(0) != b.LogProbs.Shape().Dim(0) {
		exceptions.Panicf("loss: KTO: Desirable %s: want [batch] for log-probs %s", b.Desirable.Shape(), b.LogProbs.Shape())
	}

	w := prefPresent(b.LogProbs, b.Mask)
	r := SeqSum(Sub(b.LogProbs, b.RefLogProbs), b.Mask)
	klRows := prefPresent(b.KLLogProbs, b.KLMask)
	klEst := prefRowMean(SeqSum(Sub(b.KLLogProbs, b.KLRefLogProbs), b.KLMask), klRows)
	z0 := StopGradient(MaxScalar(klEst, 0))

	d := AsWeights(b.Desirable, r)
	u := OneMinus(d)
	x := MulScalar(Sub(r, z0), beta)
	// 1 − σ(β(r − z0)) = σ(β(z0 − r)) and 1 − σ(β(z0 − r)) = σ(β(r − z0)).
	rowLoss := Add(MulScalar(Mul(d, Sigmoid(Neg(x))), desirableWeight), MulScalar(Mul(u, Sigmoid(x)), undesirableWeight))
	loss := prefRowMean(rowLoss, w)

	reward := MulScalar(r, beta)
	chosen := prefRowMean(reward, Mul(w, d))
	rejected := prefRowMean(reward, Mul(w, u))
	return loss, Metrics{
		"rewards/chosen":   chosen,
		"rewards/rejected": rejected,
		"rewards/margin":   Sub(chosen, rejected),
		"kl":               z0,
	}
}
