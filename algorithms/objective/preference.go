package objective

import (
	"fmt"
	"slices"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	gm "github.com/gomlx/gomlx/ml/model"
	"github.com/gomlx/gomlx/support/exceptions"

	"github.com/temperml/temper/algorithms/loss"
	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/algorithms/model"
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
	losscfg.PrefDPO:   {"rewards/chosen", "rewards/rejected", "rewards/margin", "rewards/accuracy", "kl_ref"},
	losscfg.PrefIPO:   {"rewards/chosen", "rewards/rejected", "rewards/margin", "rewards/accuracy", "kl_ref"},
	losscfg.PrefORPO:  {"nll", "or_loss", "log_odds_ratio", "logps/chosen", "logps/rejected", "rewards/accuracy"},
	losscfg.PrefSimPO: {"rewards/chosen", "rewards/rejected", "rewards/margin", "rewards/accuracy"},
	losscfg.PrefKTO:   {"rewards/chosen", "rewards/rejected", "rewards/margin", "kl"},
}

// PrefName names the objective of cfg: the kind and every hyperparameter baked into its graph.
func PrefName(cfg losscfg.Preference) string {
	b := cfg.BetaOrDefault()
	switch cfg.Kind {
	case losscfg.PrefDPO:
		return fmt.Sprintf("pref/dpo(beta=%g,label_smoothing=%g%s)", b, cfg.LabelSmoothing, sftName(cfg))
	case losscfg.PrefIPO:
		return fmt.Sprintf("pref/ipo(beta=%g,average_log_probs=%t%s)", b, cfg.AverageLogProbs, sftName(cfg))
	case losscfg.PrefORPO:
		return fmt.Sprintf("pref/orpo(lambda=%g)", cfg.Lambda)
	case losscfg.PrefSimPO:
		return fmt.Sprintf("pref/simpo(beta=%g,gamma_beta_ratio=%g,label_smoothing=%g%s)", b, cfg.GammaBetaRatio, cfg.LabelSmoothing, sftName(cfg))
	case losscfg.PrefKTO:
		return fmt.Sprintf("pref/kto(beta=%g,desirable_weight=%g,undesirable_weight=%g%s)", b, cfg.DesirableWeight, cfg.UndesirableWeight, sftName(cfg))
	}
	return "pref/" + cfg.Kind
}

// sftName is the sft_coef suffix of an objective name ("" when the term is off).
func sftName(cfg losscfg.Preference) string {
	if cfg.SFTCoef == 0 {
		return ""
	}
	return fmt.Sprintf(",sft_coef=%g", cfg.SFTCoef)
}

// metricsOf is the kind's own metrics plus sft_nll when the RPO term is on.
func metricsOf(cfg losscfg.Preference) []string {
	m := slices.Clone(lossMetrics[cfg.Kind])
	if cfg.SFTCoef != 0 {
		m = append(m, "sft_nll")
	}
	return m
}

// Preference returns the training objective of a preference loss: the paired objective (its input a
// PrefBatch) for dpo, ipo, orpo and simpo, the KTO objective (a KTOBatch) for kto. Its metrics are the
// loss's own (see algorithms/loss) followed by the extras above. cfg must validate.
func Preference(cfg losscfg.Preference) (Objective, error) {
	if err := cfg.Validate(); err != nil {
		return Objective{}, fmt.Errorf("objective: %w", err)
	}
	if !cfg.Paired() {
		return Objective{
			Name:    PrefName(cfg),
			Metrics: append(metricsOf(cfg), MetricRows),
			Build: func(scope *gm.Scope, mc model.Config, in []*Node) (*Node, map[string]*Node) {
				b := ktoIn(in)
				lp := SeqLogProbs(scope, mc, b.rows.tokens, b.rows.positions, b.rows.valid)
				klp := SeqLogProbs(scope, mc, b.kl.tokens, b.kl.positions, b.kl.valid)
				l, m := loss.KTOLoss(cfg, loss.KTOBatch{
					LogProbs: lp, RefLogProbs: b.ref, Mask: b.rows.mask, Desirable: b.desirable,
					KLLogProbs: klp, KLRefLogProbs: b.klRef, KLMask: b.kl.mask,
				})
				m[MetricRows] = ReduceAllSum(present(b.rows.mask, lp))
				return l, m
			},
		}, nil
	}
	return Objective{
		Name:    PrefName(cfg),
		Metrics: append(metricsOf(cfg), MetricLogPChosen, MetricLogPRejected, MetricPrefAccuracy, MetricPairs),
		Build: func(scope *gm.Scope, mc model.Config, in []*Node) (*Node, map[string]*Node) {
			b := prefIn(cfg.Kind, in)
			chosen, rejected := pairLogProbs(scope, mc, b.chosen, b.rejected)
			cm, rm := b.chosen.mask, b.rejected.mask
			l, m := loss.PairLoss(cfg, loss.PrefPair{
				Chosen: chosen, ChosenMask: cm, Rejected: rejected, RejectedMask: rm,
				RefChosen: b.refChosen, RefRejected: b.refRejected,
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
func pairLogProbs(scope *gm.Scope, cfg model.Config, c, r sideNodes) (chosen, rejected *Node) {
	if !c.tokens.Shape().Equal(r.tokens.Shape()) {
		return SeqLogProbs(scope, cfg, c.tokens, c.positions, c.valid), SeqLogProbs(scope, cfg, r.tokens, r.positions, r.valid)
	}
	rows := c.tokens.Shape().Dim(0)
	cat := func(a, b *Node) *Node { return Concatenate([]*Node{a, b}, 0) }
	both := SeqLogProbs(scope, cfg, cat(c.tokens, r.tokens), cat(c.positions, r.positions), cat(c.valid, r.valid))
	return SliceAxis(both, 0, AxisRange(0, rows)), SliceAxis(both, 0, AxisRange(rows, 2*rows))
}

// present is 1 for rows whose mask counts a token: mask [rows, seq] → [rows] (dtype of like).
func present(mask, like *Node) *Node {
	n := ReduceSum(loss.AsWeights(mask, like), -1)
	return ConvertDType(GreaterThan(n, ZerosLike(n)), like.DType())
}

func checkInputs(kind string, in []*Node, want int) {
	if len(in) != want {
		exceptions.Panicf("objective: %s: got %d inputs, want %d (a PrefBatch, or a KTOBatch for kto)", kind, len(in), want)
	}
}
