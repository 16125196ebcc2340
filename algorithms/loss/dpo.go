package loss

import (
	"fmt"
	"math"
	"slices"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/support/exceptions"
)

// Preference-loss kinds accepted by Preference.Kind.
const (
	PrefDPO   = "dpo"
	PrefIPO   = "ipo"
	PrefORPO  = "orpo"
	PrefSimPO = "simpo"
	PrefKTO   = "kto"
)

// PrefKinds lists the accepted Preference.Kind values.
var PrefKinds = []string{PrefDPO, PrefIPO, PrefORPO, PrefSimPO, PrefKTO}

// Preference configures one preference loss (DPO, IPO, ORPO, SimPO or KTO). Fields that the chosen
// kind does not read are ignored (and not validated), except label_smoothing, which only dpo and simpo
// accept so that a value meant for them is not silently dropped.
//
// β depends on the kind, so Beta = 0 means "the kind's default" (DefaultBeta, read through
// BetaOrDefault), and DefaultPreference leaves it 0: a config whose defaults are filled in before its
// kind is decoded (kind: simpo, no beta) still gets the right β.
type Preference struct {
	Kind string  `json:"kind" default:"dpo" help:"preference loss: dpo | ipo | orpo | simpo | kto"`
	Beta float64 `json:"beta" default:"0" help:"β > 0, scale of the implicit reward; 0 picks the kind's default: dpo 0.1, ipo 0.1, kto 0.1, simpo 2.0 (orpo has no β; see lambda)"`
	// LabelSmoothing is the assumed rate ε of flipped preference labels (conservative DPO, cDPO).
	LabelSmoothing float64 `json:"label_smoothing" default:"0" help:"dpo, simpo: assumed rate ε of flipped preference labels (conservative DPO), 0 ≤ ε < 0.5"`
	// AverageLogProbs makes IPO use length-averaged log-ratios, as TRL does; false is the paper's sums.
	AverageLogProbs bool `json:"average_log_probs" default:"true" help:"ipo: length-average the log-ratios as TRL does (false: the paper's per-sequence sums)"`
	// GammaBetaRatio sets SimPO's target reward margin γ = GammaBetaRatio·β, the parameterisation the
	// SimPO authors tune (β 2.0, γ/β 0.5 → γ 1.0).
	GammaBetaRatio float64 `json:"gamma_beta_ratio" default:"0.5" help:"simpo: target reward margin as a multiple of β (γ = ratio·β), ≥ 0"`
	Lambda         float64 `json:"lambda" default:"0.1" help:"orpo: weight λ > 0 of the odds-ratio term added to the chosen NLL"`
	// DesirableWeight and UndesirableWeight are KTO's λD and λU. The KTO paper advises choosing them so
	// that λD·n_D / (λU·n_U) ∈ [1, 4/3], n_D and n_U being the numbers of desirable and undesirable
	// examples; with balanced data the defaults (1, 1) satisfy it.
	DesirableWeight   float64 `json:"desirable_weight" default:"1" help:"kto: λD > 0, weight of desirable rows; the paper advises λD·n_D/(λU·n_U) in [1, 4/3]"`
	UndesirableWeight float64 `json:"undesirable_weight" default:"1" help:"kto: λU > 0, weight of undesirable rows"`
	// SFTCoef α adds α × the token-mean negative log-likelihood of the chosen (KTO: desirable)
	// completions to the loss: the NLL term of RPO (Pang et al. 2024, "Iterative Reasoning Preference
	// Optimization"; TRL's rpo_alpha). DPO-style losses only see the margin between chosen and
	// rejected, so both log-probs can fall together (the margin grows while the chosen answer becomes
	// unlikely, the collapse seen on small models); the NLL term holds the chosen log-prob up. ORPO has
	// this term built in and rejects a second one.
	SFTCoef float64 `json:"sft_coef" default:"0" help:"dpo, ipo, simpo, kto: α ≥ 0, add α × NLL of the chosen (desirable) completions (RPO); keeps log-probs from collapsing"`
}

// DefaultBeta is β when Preference.Beta is 0: 0.1 for dpo, ipo and kto (the papers' and TRL's
// default), 2.0 for simpo (the SimPO authors' recommended setting), 0 for orpo (which has no β) and for
// unknown kinds.
func DefaultBeta(kind string) float64 {
	switch kind {
	case PrefDPO, PrefIPO, PrefKTO:
		return 0.1
	case PrefSimPO:
		return 2.0
	}
	return 0
}

// DefaultPreference returns the documented defaults for kind: β = 0 (so DefaultBeta(kind)), ε = 0,
// IPO on averaged log-ratios, SimPO γ/β = 0.5, ORPO λ = 0.1, KTO λD = λU = 1. They match the struct's
// default tags.
func DefaultPreference(kind string) Preference {
	return Preference{
		Kind: kind, AverageLogProbs: true, GammaBetaRatio: 0.5, Lambda: 0.1,
		DesirableWeight: 1, UndesirableWeight: 1,
	}
}

// BetaOrDefault is Beta, or DefaultBeta(Kind) when Beta is 0.
func (c Preference) BetaOrDefault() float64 {
	if c.Beta == 0 {
		return DefaultBeta(c.Kind)
	}
	return c.Beta
}

// UsesReference reports whether the loss needs log-probs under a frozen reference model (dpo, ipo, kto).
func (c Preference) UsesReference() bool {
	return c.Kind == PrefDPO || c.Kind == PrefIPO || c.Kind == PrefKTO
}

// Paired reports whether the loss takes (chosen, rejected) pairs (PairLoss) rather than unpaired
// labelled examples (KTO, KTOLoss).
func (c Preference) Paired() bool { return c.Kind != PrefKTO }

// Validate names the first bad field with its allowed values.
func (c Preference) Validate() error {
	if !slices.Contains(PrefKinds, c.Kind) {
		return fmt.Errorf("loss: preference kind=%q: allowed %q", c.Kind, PrefKinds)
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	if c.Kind == PrefORPO {
		if c.Beta != 0 {
			return fmt.Errorf("loss: preference beta=%g: orpo has no β (its odds-ratio weight is lambda); leave beta 0", c.Beta)
		}
	} else if !finite(c.Beta) || c.Beta < 0 {
		return fmt.Errorf("loss: preference beta=%g: must be > 0 (0 picks the kind's default %g)", c.Beta, DefaultBeta(c.Kind))
	}
	if !(c.LabelSmoothing >= 0 && c.LabelSmoothing < 0.5) {
		return fmt.Errorf("loss: preference label_smoothing=%g: must be in [0, 0.5)", c.LabelSmoothing)
	}
	if !finite(c.SFTCoef) || c.SFTCoef < 0 {
		return fmt.Errorf("loss: preference sft_coef=%g: must be ≥ 0 and finite", c.SFTCoef)
	}
	if c.SFTCoef != 0 && c.Kind == PrefORPO {
		return fmt.Errorf("loss: preference sft_coef=%g: orpo already adds the chosen NLL (weight 1); leave sft_coef 0", c.SFTCoef)
	}
	if c.LabelSmoothing != 0 && c.Kind != PrefDPO && c.Kind != PrefSimPO {
		return fmt.Errorf("loss: preference label_smoothing=%g: only dpo and simpo use it, kind is %s", c.LabelSmoothing, c.Kind)
	}
	switch c.Kind {
	case PrefSimPO:
		if !finite(c.GammaBetaRatio) || c.GammaBetaRatio < 0 {
			return fmt.Errorf("loss: preference gamma_beta_ratio=%g: must be ≥ 0 and finite", c.GammaBetaRatio)
		}
	case PrefORPO:
		if !finite(c.Lambda) || !(c.Lambda > 0) {
			return fmt.Errorf("loss: preference lambda=%g: must be > 0 and finite", c.Lambda)
		}
	case PrefKTO:
		if !finite(c.DesirableWeight) || !(c.DesirableWeight > 0) {
			return fmt.Errorf("loss: preference desirable_weight=%g: must be > 0 and finite", c.DesirableWeight)
		}
		if !finite(c.UndesirableWeight) || !(c.UndesirableWeight > 0) {
			return fmt.Errorf("loss: preference undesirable_weight=%g: must be > 0 and finite", c.UndesirableWeight)
		}
	}
	return nil
}

// PairLoss applies the configured pairwise loss (dpo, ipo, orpo, simpo) to p. It panics for kto (use
// KTOLoss) and for unknown kinds; call Validate first.
func (c Preference) PairLoss(p PrefPair) (*Node, Metrics) {
	beta := c.BetaOrDefault()
	var l *Node
	var m Metrics
	switch c.Kind {
	case PrefDPO:
		l, m = DPO(p, beta, c.LabelSmoothing)
	case PrefIPO:
		l, m = IPO(p, beta, c.AverageLogProbs)
	case PrefORPO:
		return ORPO(p, c.Lambda)
	case PrefSimPO:
		l, m = SimPO(p, beta, c.GammaBetaRatio*beta, c.LabelSmoothing)
	default:
		exceptions.Panicf("loss: preference kind %q is not a pairwise loss (allowed %q)", c.Kind, PrefKinds[:4])
	}
	return c.withSFT(l, m, p.Chosen, AsWeights(p.ChosenMask, p.Chosen))
}

// withSFT adds SFTCoef × the token-mean NLL of lp over the tokens weighted by w ([batch, seq]) and
// reports it as "sft_nll" (only when SFTCoef > 0).
func (c Preference) withSFT(l *Node, m Metrics, lp, w *Node) (*Node, Metrics) {
	if c.SFTCoef == 0 {
		return l, m
	}
	nll := Div(Neg(ReduceAllSum(Mul(lp, w))), MaxScalar(ReduceAllSum(w), 1))
	m["sft_nll"] = StopGradient(nll)
	return Add(l, MulScalar(nll, c.SFTCoef)), m
}

// KTOLoss applies KTO with the configured β, λD and λU. It panics unless Kind is kto.
func (c Preference) KTOLoss(b KTOBatch) (*Node, Metrics) {
	if c.Kind != PrefKTO {
		exceptions.Panicf("loss: preference kind %q: KTOLoss needs kind kto", c.Kind)
	}
	l, m := KTO(b, c.BetaOrDefault(), c.DesirableWeight, c.UndesirableWeight)
	if c.SFTCoef == 0 {
		return l, m
	}
	mask := AsWeights(b.Mask, b.LogProbs)
	des := ExpandAxes(AsWeights(b.Desirable, b.LogProbs), -1)
	return c.withSFT(l, m, b.LogProbs, Mul(mask, des))
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
