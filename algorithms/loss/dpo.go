package loss

import (
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/support/exceptions"

	"github.com/temperml/temper/algorithms/loss/losscfg"
)

// PairLoss applies c, the configured pairwise loss (dpo, ipo, orpo, simpo) to p. It panics for kto (use
// KTOLoss) and for unknown kinds; call Validate first.
func PairLoss(c losscfg.Preference, p PrefPair) (*Node, Metrics) {
	beta := c.BetaOrDefault()
	var l *Node
	var m Metrics
	switch c.Kind {
	case losscfg.PrefDPO:
		l, m = DPO(p, beta, c.LabelSmoothing)
	case losscfg.PrefIPO:
		l, m = IPO(p, beta, c.AverageLogProbs)
	case losscfg.PrefORPO:
		return ORPO(p, c.Lambda)
	case losscfg.PrefSimPO:
		l, m = SimPO(p, beta, c.GammaBetaRatio*beta, c.LabelSmoothing)
	default:
		exceptions.Panicf("loss: preference kind %q is not a pairwise loss (allowed %q)", c.Kind, losscfg.PrefKinds[:4])
	}
	return withSFT(c, l, m, p.Chosen, AsWeights(p.ChosenMask, p.Chosen))
}

// withSFT adds SFTCoef × the token-mean NLL of lp over the tokens weighted by w ([batch, seq]) and
// reports it as "sft_nll" (only when SFTCoef > 0).
func withSFT(c losscfg.Preference, l *Node, m Metrics, lp, w *Node) (*Node, Metrics) {
	if c.SFTCoef == 0 {
		return l, m
	}
	nll := Div(Neg(ReduceAllSum(Mul(lp, w))), MaxScalar(ReduceAllSum(w), 1))
	m["sft_nll"] = StopGradient(nll)
	return Add(l, MulScalar(nll, c.SFTCoef)), m
}

// KTOLoss applies KTO with the configured β, λD and λU. It panics unless Kind is kto.
func KTOLoss(c losscfg.Preference, b KTOBatch) (*Node, Metrics) {
	if c.Kind != losscfg.PrefKTO {
		exceptions.Panicf("loss: preference kind %q: KTOLoss needs kind kto", c.Kind)
	}
	l, m := KTO(b, c.BetaOrDefault(), c.DesirableWeight, c.UndesirableWeight)
	if c.SFTCoef == 0 {
		return l, m
	}
	mask := AsWeights(b.Mask, b.LogProbs)
	des := ExpandAxes(AsWeights(b.Desirable, b.LogProbs), -1)
	return withSFT(c, l, m, b.LogProbs, Mul(mask, des))
}

// PrefPair holds the per-token log-probs of a batch of preference pairs: prompt x, chosen (preferred)
// completion y_w and rejected completion y_l.
//
//	Chosen, ChosenMask:     [batch, seqC]  log πθ(y_w,t | x, y_w,<t), and 1 on counted completion tokens
//	Rejected, RejectedMask: [batch, seqR]  the same for y_l (seqR may differ from seqC)
//	RefChosen, RefRejected: [batch, seqC], [batch, seqR]  the same under the frozen reference πref;
//	                        unused (may be nil) for the reference-free ORPO and SimPO
//
// Masks are Bool or numeric. A row whose chosen and rejected masks are both empty is batch padding: it
// adds nothing to the loss or the metrics and is not counted in their means (an all-padding batch gives
// 0). A row with only one side empty is a data error the losses do not detect: the empty side gets
// log-prob 0 (probability 1).
type PrefPair struct {
	Chosen, ChosenMask     *Node
	Rejected, RejectedMask *Node
	RefChosen, RefRejected *Node
}

// check panics unless the shapes agree; withRef also requires the reference log-probs.
func (p PrefPair) check(op string, withRef bool) {
	if p.Chosen == nil || p.ChosenMask == nil || p.Rejected == nil || p.RejectedMask == nil {
		exceptions.Panicf("loss: %s: Chosen, ChosenMask, Rejected and RejectedMask are required", op)
	}
	if p.Chosen.Rank() != 2 || p.Rejected.Rank() != 2 {
		exceptions.Panicf("loss: %s: want [batch, seq] log-probs, got chosen %s, rejected %s", op, p.Chosen.Shape(), p.Rejected.Shape())
	}
	checkSame(op+" chosen/mask", p.Chosen, p.ChosenMask)
	checkSame(op+" rejected/mask", p.Rejected, p.RejectedMask)
	if p.Chosen.Shape().Dim(0) != p.Rejected.Shape().Dim(0) {
		exceptions.Panicf("loss: %s: chosen %s and rejected %s have different batch sizes", op, p.Chosen.Shape(), p.Rejected.Shape())
	}
	if withRef {
		if p.RefChosen == nil || p.RefRejected == nil {
			exceptions.Panicf("loss: %s: needs RefChosen and RefRejected (reference-model log-probs)", op)
		}
		checkSame(op+" chosen/reference", p.Chosen, p.RefChosen)
		checkSame(op+" rejected/reference", p.Rejected, p.RefRejected)
	}
}

// rows is 1 for pairs with at least one counted token and 0 for padding pairs: [batch].
func (p PrefPair) rows() *Node {
	return prefPresent(p.Chosen, p.ChosenMask, p.RejectedMask)
}

// prefPresent is 1 (dtype of like) for rows where any of masks counts a token, else 0: [batch].
func prefPresent(like *Node, masks ...*Node) *Node {
	var n *Node
	for _, m := range masks {
		c := ReduceSum(AsWeights(m, like), -1)
		if n == nil {
			n = c
		} else {
			n = Add(n, c)
		}
	}
	return ConvertDType(GreaterThan(n, ZerosLike(n)), like.DType())
}

// prefRowMean is the mean of x over the rows where w is 1: Σ w·x / max(Σ w, 1). x, w: [batch] → scalar.
func prefRowMean(x, w *Node) *Node {
	return Div(ReduceAllSum(Mul(x, w)), MaxScalar(ReduceAllSum(w), 1))
}

// prefRewardMetrics reports implicit rewards of chosen and rejected ([batch] each) over the rows w:
// their means, the mean margin (chosen − rejected) and the accuracy (fraction of rows with margin > 0).
func prefRewardMetrics(chosen, rejected, w *Node) Metrics {
	margin := Sub(chosen, rejected)
	correct := ConvertDType(GreaterThan(margin, ZerosLike(margin)), margin.DType())
	return Metrics{
		"rewards/chosen":   prefRowMean(chosen, w),
		"rewards/rejected": prefRowMean(rejected, w),
		"rewards/margin":   prefRowMean(margin, w),
		"rewards/accuracy": prefRowMean(correct, w),
	}
}

// prefSigmoidLoss is the label-smoothed logistic loss −(1−ε)·log σ(z) − ε·log σ(−z): [batch] → [batch].
func prefSigmoidLoss(z *Node, eps float64) *Node {
	l := Neg(LogSigmoid(z))
	if eps != 0 {
		l = Add(MulScalar(l, 1-eps), MulScalar(Neg(LogSigmoid(Neg(z))), eps))
	}
	return l
}

// DPO is Direct Preference Optimization (Rafailov et al. 2023, "Direct Preference Optimization: Your
// Language Model is Secretly a Reward Model"), with the label smoothing ε of conservative DPO (cDPO,
// Mitchell 2023), which assumes a fraction ε of the preference labels are flipped:
//
//	h    = β·[(log πθ(y_w|x) − log πref(y_w|x)) − (log πθ(y_l|x) − log πref(y_l|x))]
//	loss = mean over pairs of  −(1−ε)·log σ(h) − ε·log σ(−h)
//
// with log π(y|x) the sum of the per-token log-probs (SeqSum). ε = 0 is the paper's loss; h = 0 gives
// log 2 for every ε. Requires β > 0 and 0 ≤ ε < 0.5 (at 0.5 the loss no longer prefers either side).
//
// Inputs: see PrefPair (reference log-probs required). Returns the scalar loss and, as means over the
// non-padding pairs:
//
//	rewards/chosen    β·(log πθ(y_w|x) − log πref(y_w|x)), the implicit reward of the chosen completion
//	rewards/rejected  the same for y_l
//	rewards/margin    rewards/chosen − rewards/rejected (= h)
//	rewards/accuracy  fraction of pairs with margin > 0
//	kl_ref            log πθ(y_w|x) − log πref(y_w|x) (no β): an estimate of KL(πθ‖πref) in nats per
//	                  sequence. It is exact in expectation only for completions sampled from πθ; the
//	                  chosen completions come from the dataset, so read it as a drift indicator.
func DPO(p PrefPair, beta, labelSmoothing float64) (*Node, Metrics) {
	p.check("DPO", true)
	w := p.rows()
	lc := SeqSum(Sub(p.Chosen, p.RefChosen), p.ChosenMask)
	lr := SeqSum(Sub(p.Rejected, p.RefRejected), p.RejectedMask)
	rc, rr := MulScalar(lc, beta), MulScalar(lr, beta)
	loss := prefRowMean(prefSigmoidLoss(Sub(rc, rr), labelSmoothing), w)
	m := prefRewardMetrics(rc, rr, w)
	m["kl_ref"] = prefRowMean(lc, w)
	return loss, m
}
