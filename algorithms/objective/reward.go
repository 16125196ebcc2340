package objective

import (
	"fmt"

	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/loss"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/objective/objectivecfg"
)

// BTMetrics are the metrics BradleyTerry reports, all weighted means over the real pairs except
// pairs (their count): accuracy is the fraction with r_c > r_r (ties count as wrong), margin the
// mean r_c − r_r, bt_loss the mean −log σ(r_c − r_r − m) without the centering term, lm_loss the
// chosen completions' cross-entropy (0 when lm_coef is 0).
var BTMetrics = []string{"accuracy", "margin", "reward_chosen", "reward_rejected", "bt_loss", "pairs", "lm_loss"}

// BTLoss is the Bradley–Terry loss on sequence rewards.
//
//	rc, rr: [rows] float32 rewards of the chosen and rejected completions
//	w:      [rows] float32 pair weights: 1 for a real pair, 0 for a padding row
//	loss:   scalar Σ w·ℓ / Σ w (0 when Σ w = 0)
func BTLoss(cfg objectivecfg.BTConfig, rc, rr, w *Node) (*Node, map[string]*Node) {
	for _, x := range []*Node{rc, rr, w} {
		if x.Rank() != 1 || x.Shape().Dim(0) != rc.Shape().Dim(0) {
			panic(fmt.Sprintf("objective: bradley-terry: rewards and weights must be [rows], got %s %s %s", rc.Shape(), rr.Shape(), w.Shape()))
		}
	}
	w = loss.AsWeights(w, rc)
	n := ReduceAllSum(w)
	den := MaxScalar(n, 1e-9)
	mean := func(x *Node) *Node { return Div(ReduceAllSum(Mul(x, w)), den) }
	diff := Sub(rc, rr)
	bt := Neg(loss.LogSigmoid(AddScalar(diff, -cfg.Margin)))
	per := bt
	if cfg.CenterCoef != 0 {
		per = Add(per, MulScalar(Square(Add(rc, rr)), cfg.CenterCoef))
	}
	right := ConvertDType(GreaterThan(rc, rr), rc.DType())
	return mean(per), map[string]*Node{
		"accuracy": mean(right), "margin": mean(diff), "reward_chosen": mean(rc), "reward_rejected": mean(rr),
		"bt_loss": mean(bt), "pairs": n,
	}
}

// SequenceRewards is a reward model's score of each row: the value head read at the row's last
// real token and, when the model has the generative term (model.Config.RewardLogProb), α times the
// log-likelihood the model gives the row's completion tokens:
//
//	r = value(h_last) [+ α·Σ_t completion[t]·log π(tokens[t] | tokens[<t])]
//
//	tokens, positions: [rows, seq] int32 (right-padded; positions 0.. from the first token)
//	valid:             [rows, seq] bool (or numeric, non-zero = real token)
//	last:              [rows] int32, index of the row's last real token (the EOS)
//	completion:        [rows, seq] float32, 1 on the completion's tokens (and EOS), 0 on BOS,
//	                   prompt and padding
//	rewards:           [rows] float32
//
// cfg.ValueHead must be set. Only the last position's value carries gradient; with the generative
// term, every completion token's log-prob does too (through the LM head and the trunk).
//
// Why the generative term: whether "…=47" is right depends on what the sum's units digit should
// be, which the LM head already predicts at the position before it; a linear head on the last
// hidden state has to recompute and compare it inside the trunk. DPO's implicit reward (a
// log-likelihood ratio) ranks arithmetic pairs far better than a last-token value head of the
// same size for this reason.
func SequenceRewards(scope *gm.Scope, cfg model.Config, tokens, positions, valid, last, completion *Node) *Node {
	if !cfg.ValueHead {
		panic("objective: sequence rewards need a model with value_head")
	}
	return sequenceRewards(scope, cfg, model.Hidden(scope, cfg, tokens, positions, valid), tokens, last, completion)
}

// sequenceRewards is SequenceRewards on the trunk's hidden states [rows, seq, d].
func sequenceRewards(scope *gm.Scope, cfg model.Config, hidden, tokens, last, completion *Node) *Node {
	rows, seq := tokens.Shape().Dim(0), tokens.Shape().Dim(1)
	if completion.Rank() != 2 || completion.Shape().Dim(0) != rows || completion.Shape().Dim(1) != seq {
		panic(fmt.Sprintf("objective: sequence rewards: completion mask %s, want [%d, %d]", completion.Shape(), rows, seq))
	}
	if last.Rank() != 1 || last.Shape().Dim(0) != rows {
		panic(fmt.Sprintf("objective: sequence rewards: last %s, want [%d]", last.Shape(), rows))
	}
	values := model.ValueHead(scope, cfg, hidden)
	pick := OneHot(last, values.Shape().Dim(1), values.DType())
	r := ReduceSum(Mul(values, pick), 1)
	if !cfg.RewardLogProb || seq < 2 {
		return r
	}
	logp := model.NextTokenLogProbs(model.LMHead(scope, cfg, hidden), tokens) // [rows, seq-1]: token t+1
	m := loss.AsWeights(SliceAxis(completion, 1, AxisRange(1, seq)), logp)
	alpha := model.RewardLogProbWeight(scope, hidden.Graph())
	return Add(r, Mul(ReduceSum(Mul(logp, m), 1), alpha))
}

// BradleyTerry is the reward-model objective (see BTConfig for the loss; the rewards are
// SequenceRewards').
//
// Its input is a BTBatch: the chosen and rejected completions (Sequences of one [rows, seq] shape;
// their completion masks mark the generative term's tokens and, with lm_coef, the cross-entropy's
// targets) and the pair weights.
func BradleyTerry(cfg objectivecfg.BTConfig) Objective {
	return Objective{
		Name:    fmt.Sprintf("bradley-terry[m=%g c=%g lm=%g]", cfg.Margin, cfg.CenterCoef, cfg.LMCoef),
		Metrics: BTMetrics,
		Build: func(scope *gm.Scope, mc model.Config, in []*Node) (*Node, map[string]*Node) {
			b := btIn(in)
			c, rj := b.chosen, b.rejected
			if !c.tokens.Shape().Equal(rj.tokens.Shape()) {
				panic(fmt.Sprintf("objective bradley-terry: chosen %s and rejected %s tokens differ in shape", c.tokens.Shape(), rj.tokens.Shape()))
			}
			if !mc.ValueHead {
				panic("objective bradley-terry: the model has no value_head")
			}
			rows := c.tokens.Shape().Dim(0)
			cat := func(a, b *Node) *Node { return Concatenate([]*Node{a, b}, 0) }
			tokens := cat(c.tokens, rj.tokens)
			hidden := model.Hidden(scope, mc, tokens, cat(c.positions, rj.positions), cat(rewardBool(c.valid), rewardBool(rj.valid)))
			r := sequenceRewards(scope, mc, hidden, tokens, cat(c.last, rj.last), cat(c.completion, rj.completion))
			rc := Slice(r, AxisRange(0, rows))
			rr := Slice(r, AxisRange(rows, 2*rows))
			loss, metrics := BTLoss(cfg, rc, rr, b.weight)
			if cfg.LMCoef > 0 {
				logits := model.LMHead(scope, mc, Slice(hidden, AxisRange(0, rows)))
				lm := model.NextTokenLoss(logits, c.tokens, c.completion)
				loss = Add(loss, MulScalar(lm, cfg.LMCoef))
				metrics["lm_loss"] = lm
			}
			return loss, metrics
		},
	}
}

// RewardScoreName prefixes the metric names of RewardScores: row i's reward is
// fmt.Sprintf("%s%03d", RewardScoreName, i).
const RewardScoreName = "reward_"

// RewardScores is an evaluation-only objective that returns every row's sequence reward as a
// metric (the engine interface returns named scalars only), so a trained reward model can score
// completions through EvalObjective. Its loss is the mean reward.
//
// Its input is Sequences of rows rows. Metrics: "reward_000" … one per row.
func RewardScores(rows int) Objective {
	names := make([]string, rows)
	for i := range names {
		names[i] = fmt.Sprintf("%s%03d", RewardScoreName, i)
	}
	return Objective{
		Name:    fmt.Sprintf("reward-scores[%d]", rows),
		Metrics: names,
		Build: func(scope *gm.Scope, mc model.Config, in []*Node) (*Node, map[string]*Node) {
			s := seqIn("reward-scores", in)
			if s.tokens.Shape().Dim(0) != rows {
				panic(fmt.Sprintf("objective reward-scores: %d rows, want %d", s.tokens.Shape().Dim(0), rows))
			}
			r := SequenceRewards(scope, mc, s.tokens, s.positions, rewardBool(s.valid), s.last, s.completion)
			out := make(map[string]*Node, rows)
			for i, n := range names {
				out[n] = Reshape(Slice(r, AxisElem(i)))
			}
			return ReduceAllMean(r), out
		},
	}
}

func rewardBool(x *Node) *Node {
	if x.DType() == dtypes.Bool {
		return x
	}
	return NotEqual(x, ScalarZero(x.Graph(), x.DType()))
}
