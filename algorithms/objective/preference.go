package objective

import (
	"fmt"
	"slices"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	gm "github.com/gomlx/gomlx/ml/model"
	"github.com/gomlx/gomlx/support/exceptions"

	"github.com/temperml/temper/algorithms/loss"
	"github.com/temperml/temper/algorithms/model"
)

// Inputs of the paired preference objective (dpo, ipo, orpo, simpo), in this order. Every input is
// [rows, seq], and the chosen and rejected sides may have different seq. Each side is one example per
// row, prompt+completion right-padded:
//
//	tokens     int32    the sequence; padding any id (PAD)
//	positions  int32    RoPE positions (0..seq-1 for right padding)
//	valid      bool     true on real tokens (keys attention may see)
//	mask       float32  aligned with next-token log-probs: mask[r,t] = 1 when tokens[r,t+1] is a trained
//	                    completion token (completion and EOS), 0 on the prompt, padding and the last column
//
// and the reference log-probs, aligned the same way: ref[r,t] = log πref(tokens[r,t+1] | tokens[r,≤t]),
// read only where mask is 1 (zeros for the reference-free orpo and simpo, which ignore them).
const (
	PrefChosenTokens = iota
	PrefChosenPositions
	PrefChosenValid
	PrefChosenMask
	PrefRejectedTokens
	PrefRejectedPositions
	PrefRejectedValid
	PrefRejectedMask
	PrefRefChosen
	PrefRefRejected
	PrefInputs // number of inputs
)

// Inputs of the KTO objective, in this order: the labelled completions (tokens, positions, valid, mask
// and reference log-probs [rows, seq] as above), Desirable [rows] float32 (1 desirable, 0 undesirable),
// then the mismatched pairs (x_i, y_j≠i) that estimate KTO's reference point, in the same five forms
// [rowsKL, seqKL].
const (
	KTOTokens = iota
	KTOPositions
	KTOValid
	KTOMask
	KTORef
	KTODesirable
	KTOKLTokens
	KTOKLPositions
	KTOKLValid
	KTOKLMask
	KTOKLRef
	KTOInputs // number of inputs
)

// Extra metrics every preference objective reports besides its loss's own.
//
//	logp/chosen, logp/rejected  mean per-sequence log πθ(y|x) of the chosen and rejected completions
//	pref_accuracy               fraction of pairs with log πθ(y_w|x) > log πθ(y_l|x) (sums)
//	pairs                       number of non-padding pairs (KTO: rows)
const (
	MetricLogPChosen   = "logp/chosen"
	MetricLogPRejected = "logp/rejected"
	MetricPrefAccuracy = "pref_accuracy"
	MetricPairs        = "pairs"
	MetricRows         = "rows"
)

// lossMetrics lists each kind's own metrics (algorithms/loss), in reporting order.
var lossMetrics = map[string][]string{
	loss.PrefDPO:   {"rewards/chosen", "rewards/rejected", "rewards/margin", "rewards/accuracy", "kl_ref"},
	loss.PrefIPO:   {"rewards/chosen", "rewards/rejected", "rewards/margin", "rewards/accuracy", "kl_ref"},
	loss.PrefORPO:  {"nll", "or_loss", "log_odds_ratio", "logps/chosen", "logps/rejected", "rewards/accuracy"},
	loss.PrefSimPO: {"rewards/chosen", "rewards/rejected", "rewards/margin", "rewards/accuracy"},
	loss.PrefKTO:   {"rewards/chosen", "rewards/rejected", "rewards/margin", "kl"},
}

// PrefName names the objective of cfg: the kind and every hyperparameter baked into its graph.
func PrefName(cfg loss.Preference) string {
	b := cfg.BetaOrDefault()
	switch cfg.Kind {
	case loss.PrefDPO:
		return fmt.Sprintf("pref/dpo(beta=%g,label_smoothing=%g%s)", b, cfg.LabelSmoothing, sftName(cfg))
	case loss.PrefIPO:
		return fmt.Sprintf("pref/ipo(beta=%g,average_log_probs=%t%s)", b, cfg.AverageLogProbs, sftName(cfg))
	case loss.PrefORPO:
		return fmt.Sprintf("pref/orpo(lambda=%g)", cfg.Lambda)
	case loss.PrefSimPO:
		return fmt.Sprintf("pref/simpo(beta=%g,gamma_beta_ratio=%g,label_smoothing=%g%s)", b, cfg.GammaBetaRatio, cfg.LabelSmoothing, sftName(cfg))
	case loss.PrefKTO:
		return fmt.Sprintf("pref/kto(beta=%g,desirable_weight=%g,undesirable_weight=%g%s)", b, cfg.DesirableWeight, cfg.UndesirableWeight, sftName(cfg))
	}
	return "pref/" + cfg.Kind
}

// sftName is the sft_coef suffix of an objective name ("" when the term is off).
func sftName(cfg loss.Preference) string {
	if cfg.SFTCoef == 0 {
		return ""
	}
	return fmt.Sprintf(",sft_coef=%g", cfg.SFTCoef)
}

// metricsOf is the kind's own metrics plus sft_nll when the RPO term is on.
func metricsOf(cfg loss.Preference) []string {
	m := slices.Clone(lossMetrics[cfg.Kind])
	if cfg.SFTCoef != 0 {
		m = append(m, "sft_nll")
	}
	return m
}

// Preference returns the training objective of a preference loss: the paired objective (inputs
// Pref*) for dpo, ipo, orpo and simpo, the KTO objective (inputs KTO*) for kto. Its metrics are the
// loss's own (see algorithms/loss) followed by the extras above. cfg must validate.
func Preference(cfg loss.Preference) (Objective, error) {
	if err := cfg.Validate(); err != nil {
		return Objective{}, fmt.Errorf("objective: %w", err)
	}
	if !cfg.Paired() {
		return Objective{
			Name:    PrefName(cfg),
			Metrics: append(metricsOf(cfg), MetricRows),
			Build: func(scope *gm.Scope, mc model.Config, in []*Node) (*Node, map[string]*Node) {
				checkInputs("kto", in, KTOInputs)
				lp := SeqLogProbs(scope, mc, in[KTOTokens], in[KTOPositions], in[KTOValid])
				klp := SeqLogProbs(scope, mc, in[KTOKLTokens], in[KTOKLPositions], in[KTOKLValid])
				l, m := loss.KTOLoss(cfg, loss.KTOBatch{
					LogProbs: lp, RefLogProbs: in[KTORef], Mask: in[KTOMask], Desirable: in[KTODesirable],
					KLLogProbs: klp, KLRefLogProbs: in[KTOKLRef], KLMask: in[KTOKLMask],
				})
				m[MetricRows] = ReduceAllSum(present(in[KTOMask], lp))
				return l, m
			},
		}, nil
	}
	return Objective{
		Name:    PrefName(cfg),
		Metrics: append(metricsOf(cfg), MetricLogPChosen, MetricLogPRejected, MetricPrefAccuracy, MetricPairs),
		Build: func(scope *gm.Scope, mc model.Config, in []*Node) (*Node, map[string]*Node) {
			checkInputs(cfg.Kind, in, PrefInputs)
			chosen, rejected := pairLogProbs(scope, mc, in)
			cm, rm := in[PrefChosenMask], in[PrefRejectedMask]
			l, m := loss.PairLoss(cfg, loss.PrefPair{
				Chosen: chosen, ChosenMask: cm, Rejected: rejected, RejectedMask: rm,
				RefChosen: in[PrefRefChosen], RefRejected: in[PrefRefRejected],
			})
			w := Max(present(cm, chosen), present(rm, rejected))
			n := MaxScalar(ReduceAllSum(w), 1)
			sc, sr := loss.SeqSum(chosen, cm), loss.SeqSum(rejected, rm)
			better := ConvertDType(GreaterThan(sc, sr), sc.DType())
			m[MetricLogPChosen] = Div(ReduceAllSum(Mul(sc, w)), n)
			m[MetricLogPRejected] = Div(ReduceAllSum(Mul(sr, w)), n)
			m[MetricPrefAccuracy] = Div(ReduceAllSum(Mul(better, w)), n)
			m[MetricPairs] = ReduceAllSum(w)
			return l, m
		},
	}, nil
}

// SeqLogProbs runs the model on one side and returns its next-token log-probs aligned with the
// inputs' masks: out[r,t] = log πθ(tokens[r,t+1] | tokens[r,≤t]); the last column scores tokens[r,0]
// as a filler (always masked).
//
//	tokens, positions: [rows, seq] int32; valid: [rows, seq] bool → [rows, seq] float32
func SeqLogProbs(scope *gm.Scope, cfg model.Config, tokens, positions, valid *Node) *Node {
	seq := tokens.Shape().Dim(1)
	logits := model.Forward(scope, cfg, tokens, positions, valid)
	if seq == 1 {
		return model.TokenLogProbs(logits, tokens)
	}
	targets := Concatenate([]*Node{SliceAxis(tokens, 1, AxisRange(1, seq)), SliceAxis(tokens, 1, AxisRange(0, 1))}, 1)
	return model.TokenLogProbs(logits, targets)
}

// pairLogProbs scores both sides, in one forward pass when their shapes agree.
func pairLogProbs(scope *gm.Scope, cfg model.Config, in []*Node) (chosen, rejected *Node) {
	ct, rt := in[PrefChosenTokens], in[PrefRejectedTokens]
	if !ct.Shape().Equal(rt.Shape()) {
		return SeqLogProbs(scope, cfg, ct, in[PrefChosenPositions], in[PrefChosenValid]),
			SeqLogProbs(scope, cfg, rt, in[PrefRejectedPositions], in[PrefRejectedValid])
	}
	rows := ct.Shape().Dim(0)
	cat := func(a, b int) *Node { return Concatenate([]*Node{in[a], in[b]}, 0) }
	both := SeqLogProbs(scope, cfg, cat(PrefChosenTokens, PrefRejectedTokens),
		cat(PrefChosenPositions, PrefRejectedPositions), cat(PrefChosenValid, PrefRejectedValid))
	return SliceAxis(both, 0, AxisRange(0, rows)), SliceAxis(both, 0, AxisRange(rows, 2*rows))
}

// present is 1 for rows whose mask counts a token: mask [rows, seq] → [rows] (dtype of like).
func present(mask, like *Node) *Node {
	n := ReduceSum(loss.AsWeights(mask, like), -1)
	return ConvertDType(GreaterThan(n, ZerosLike(n)), like.DType())
}

func checkInputs(kind string, in []*Node, want int) {
	if len(in) != want {
		exceptions.Panicf("objective: %s: got %d inputs, want %d (see the Pref*/KTO* input constants)", kind, len(in), want)
	}
}
