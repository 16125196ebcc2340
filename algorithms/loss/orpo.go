package loss

import (
	"math"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
)

// logOddsMaxLogProb caps log p in LogOdds at −1e-7 (p ≤ 1 − 1e-7, log-odds ≤ ≈16.1). Float32 cannot
// represent probabilities closer to 1 anyway, and the log-odds are +∞ at p = 1, which an empty
// completion (average log-prob 0) would otherwise produce.
const logOddsMaxLogProb = -1e-7

// LogOdds returns log(p / (1 − p)) elementwise from lp = log p ≤ 0: lp − log(1 − exp(lp)).
//
// log(1 − eˣ) is evaluated as log(−expm1(x)) for x ≥ −ln 2 and as log1p(−eˣ) below (Mächler 2012,
// "Accurately Computing log(1 − exp(−|a|))"), which keeps full relative precision at both ends: near 0,
// where 1 − eˣ cancels, and for very negative x, where eˣ underflows. Each branch sees its input clamped
// to its own range, so the branch Where discards never yields an inf or NaN that would leak into the
// gradient. lp is first clamped to logOddsMaxLogProb (−1e-7); beyond the clamp the gradient is 0.
//
//	lp: any shape → same shape
func LogOdds(lp *Node) *Node {
	x := MinScalar(lp, logOddsMaxLogProb)
	// Max passes the gradient to x on a tie and Min to the constant, so x = −ln 2 takes the near branch.
	near := MaxScalar(x, -math.Ln2) // branch for x ≥ −ln 2: log(−expm1(x))
	far := MinScalar(x, -math.Ln2)  // branch for x < −ln 2: log1p(−eˣ)
	// GoMLX v0.28.2 has no gradient for Expm1: take its value and give it exp's gradient (d expm1 = eˣ dx);
	// e − StopGradient(e) is exactly 0 in value and carries exp's gradient.
	e := Exp(near)
	em1 := Add(StopGradient(Expm1(near)), Sub(e, StopGradient(e)))
	log1mExp := Where(GreaterOrEqual(x, Scalar(x.Graph(), x.DType(), -math.Ln2)),
		Log(Neg(em1)), Log1p(Neg(Exp(far))))
	return Sub(x, log1mExp)
}

// ORPO is Monolithic Preference Optimization without a reference model (Hong et al. 2024, "ORPO:
// Monolithic Preference Optimization without Reference Model"): supervised fine-tuning on the chosen
// completions plus an odds-ratio penalty that favours them over the rejected ones.
//
//	log P(y|x) = (1/|y|)·Σ_t log πθ(y_t | x, y_<t)            (length-averaged, as in the paper)
//	odds(y|x)  = P(y|x) / (1 − P(y|x))
//	L_OR       = −log σ(log odds(y_w|x) − log odds(y_l|x))
//	L_SFT      = −(Σ over all chosen tokens of the batch of log πθ) / (number of chosen tokens)
//	loss       = L_SFT + λ·mean over pairs of L_OR
//
// L_SFT is the token-level mean over the batch (the usual causal-LM cross-entropy that TRL's ORPO and
// model.CrossEntropy use); the paper writes it per sequence, and the two agree when the completions have
// equal lengths. Log-odds are computed stably by LogOdds.
//
// Inputs: see PrefPair (no reference model; RefChosen/RefRejected are ignored); λ > 0 (default 0.1).
// Returns the scalar loss and, as means over the non-padding pairs:
//
//	nll              L_SFT
//	or_loss          mean L_OR (before λ)
//	log_odds_ratio   log odds(y_w|x) − log odds(y_l|x)
//	logps/chosen     log P(y_w|x) (length-averaged); logps/rejected the same for y_l
//	rewards/accuracy fraction of pairs with log odds(y_w|x) > log odds(y_l|x)
func ORPO(p PrefPair, lambda float64) (*Node, Metrics) {
	p.check("ORPO", false)
	w := p.rows()
	cm := AsWeights(p.ChosenMask, p.Chosen)
	nll := Div(Neg(ReduceAllSum(Mul(p.Chosen, cm))), MaxScalar(ReduceAllSum(cm), 1))
	ac := SeqMean(p.Chosen, p.ChosenMask)
	ar := SeqMean(p.Rejected, p.RejectedMask)
	ratio := Sub(LogOdds(ac), LogOdds(ar))
	or := Neg(LogSigmoid(ratio))
	orMean := prefRowMean(or, w)
	loss := Add(nll, MulScalar(orMean, lambda))
	correct := ConvertDType(GreaterThan(ratio, ZerosLike(ratio)), ratio.DType())
	return loss, Metrics{
		"nll":              nll,
		"or_loss":          orMean,
		"log_odds_ratio":   prefRowMean(ratio, w),
		"logps/chosen":     prefRowMean(ac, w),
		"logps/rejected":   prefRowMean(ar, w),
		"rewards/accuracy": prefRowMean(correct, w),
	}
}
