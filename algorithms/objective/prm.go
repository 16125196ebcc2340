package objective

import (
	"fmt"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/loss"
	"github.com/temperml/temper/algorithms/model"
)

// PRMMetrics are the metrics of the process-reward objective, weighted means over the real steps
// except steps (their count): step_accuracy is the fraction whose score sign agrees with the label
// (score > 0 for a correct step, ≤ 0 for a wrong one), bce the mean binary cross-entropy without
// class weights (the loss has them), score the mean logit, positive the fraction labelled correct.
var PRMMetrics = []string{"step_accuracy", "bce", "score", "positive", "steps"}

// StepBatch is the input of PRM: one step-labelled solution per row. Seq are the rows (prompt and
// steps, each step followed by its newline; Last and Completion unused), Ends[r][s] the position of
// step s's newline in row r, Labels[r][s] 1 for a correct step and 0 for a wrong one, Weight[r][s] 1
// for a real step and 0 for padding (rows with fewer steps, padding rows). Ends, Labels and Weight
// are [rows, steps].
type StepBatch struct {
	Seq    Sequences
	Ends   [][]int
	Labels [][]float32
	Weight [][]float32
}

// Tensors: the Sequences' five, then ends (int32), labels and weights.
func (b StepBatch) Tensors() []*tensors.Tensor {
	return append(b.Seq.Tensors(), i32(b.Ends), f32(b.Labels), f32(b.Weight))
}

type stepNodes struct {
	seq                  seqNodes
	ends, labels, weight *Node
}

func stepIn(name string, in []*Node) stepNodes {
	if len(in) != 8 {
		panic(fmt.Sprintf("objective %s: %d inputs, want 8 (a StepBatch)", name, len(in)))
	}
	return stepNodes{seq: seqIn(name, in[:5]), ends: in[5], labels: in[6], weight: in[7]}
}

// StepLogits reads the value head's output at each step's end.
//
//	values: [rows, seq] float32 (model.ValueHead)
//	ends:   [rows, steps] int32 positions
//	logits: [rows, steps] float32
//
// A causal model's value at a step's end sees only the prompt and the steps up to it, so a step's
// score in a whole solution equals its score with nothing after it: the search scores a new step
// on its path alone, the verifier every step of a completion in one pass.
func StepLogits(values, ends *Node) *Node {
	if values.Rank() != 2 || ends.Rank() != 2 || ends.Shape().Dim(0) != values.Shape().Dim(0) {
		panic(fmt.Sprintf("objective: step logits: values %s and ends %s, want [rows, seq] and [rows, steps]", values.Shape(), ends.Shape()))
	}
	pick := OneHot(ends, values.Shape().Dim(1), values.DType()) // [rows, steps, seq]
	return ReduceSum(Mul(pick, InsertAxes(values, 1)), 2)
}

// StepLogProbs sums each step's own token log-probabilities: step s covers the positions after
// step s−1's end up to its own end (step 0: from the row's start), counting only positions where
// completion is non-zero (the steps' tokens, not the prompt).
//
//	logp:       [rows, seq-1] float32, logp[r][t] = log π(tokens[r][t+1] | tokens[r][≤t])
//	completion: [rows, seq] float32, 1 on the steps' tokens (StepBatch: from the first step's first token)
//	ends:       [rows, steps] int32 positions, increasing along a row (padding steps: 0)
//	sums:       [rows, steps] float32, Σ_{ends[s-1] < t ≤ ends[s]} completion[t]·log π(tokens[t] | tokens[<t])
//
// A step's sum reads tokens up to its own end only, so the causal property of StepLogits holds.
func StepLogProbs(logp, completion, ends *Node) *Node {
	rows, seq, steps := completion.Shape().Dim(0), completion.Shape().Dim(1), ends.Shape().Dim(1)
	if logp.Rank() != 2 || logp.Shape().Dim(0) != rows || logp.Shape().Dim(1) != seq-1 || ends.Rank() != 2 || ends.Shape().Dim(0) != rows {
		panic(fmt.Sprintf("objective: step log-probs: logp %s, completion %s, ends %s, want [rows, seq-1], [rows, seq], [rows, steps]", logp.Shape(), completion.Shape(), ends.Shape()))
	}
	g := logp.Graph()
	// tok[r][t]: token t's own log-prob (0 at t = 0, which nothing predicts), on the steps' tokens only.
	tok := Concatenate([]*Node{Zeros(g, shapes.Make(logp.DType(), rows, 1)), logp}, 1)
	tok = Mul(tok, loss.AsWeights(completion, tok))
	ends = ConvertDType(ends, dtypes.Int32)
	before := Neg(Ones(g, shapes.Make(dtypes.Int32, rows, 1))) // step 0 starts after position −1
	if steps > 1 {
		before = Concatenate([]*Node{before, Slice(ends, AxisRange(), AxisRange(0, steps-1))}, 1)
	}
	pos := BroadcastToDims(Iota(g, shapes.Make(dtypes.Int32, 1, 1, seq), 2), rows, steps, seq)
	lo := BroadcastToDims(InsertAxes(before, -1), rows, steps, seq)
	hi := BroadcastToDims(InsertAxes(ends, -1), rows, steps, seq)
	in := ConvertDType(And(GreaterThan(pos, lo), LessOrEqual(pos, hi)), tok.DType()) // [rows, steps, seq]
	return ReduceSum(Mul(in, InsertAxes(tok, 1)), 2)
}

// stepScores are a StepBatch's step logits: the value head at each step's end (StepLogits) and,
// when the model has the generative term (model.Config.RewardLogProb, as a reward model's
// SequenceRewards), α times the log-likelihood of the step's own tokens (StepLogProbs):
//
//	z[r][s] = value(h[ends[r][s]]) [+ α·Σ_{t in step s} log π(tokens[t] | tokens[<t])]
//
// Whether "12+35=47" is a right step depends on digits the LM head already predicts; the value
// head alone has to recompute them. Both terms read the row only up to the step's end.
func stepScores(scope *gm.Scope, mc model.Config, b stepNodes) *Node {
	hidden := model.Hidden(scope, mc, b.seq.tokens, b.seq.positions, rewardBool(b.seq.valid))
	z := StepLogits(model.ValueHead(scope, mc, hidden), b.ends)
	if !mc.RewardLogProb || b.seq.tokens.Shape().Dim(1) < 2 {
		return z
	}
	lp := StepLogProbs(model.NextTokenLogProbs(model.LMHead(scope, mc, hidden), b.seq.tokens), b.seq.completion, b.ends)
	return Add(z, Mul(lp, Reshape(model.RewardLogProbWeight(scope, hidden.Graph()))))
}

// ClassWeights weigh each step's cross-entropy by its label: Correct on steps labelled correct,
// Wrong on wrong ones. Search-tree labels are mostly wrong (a wrong step makes every later one
// wrong), and with equal weights a PRM scores well by calling every step wrong; balanced weights
// make both classes count alike. The zero value is the plain mean (both 1).
type ClassWeights struct{ Correct, Wrong float64 }

// BalancedWeights are the class weights total/(2·count) of a training set with correct steps
// labelled correct out of total (sklearn's "balanced"): each class then carries half of the loss,
// and the weights average 1 over the set, so the loss keeps its scale. A set with one class only
// cannot be balanced and gets the plain mean.
func BalancedWeights(correct, total int) ClassWeights {
	if correct <= 0 || correct >= total {
		return ClassWeights{}
	}
	n := float64(total)
	return ClassWeights{Correct: n / (2 * float64(correct)), Wrong: n / (2 * float64(total-correct))}
}

// resolved reads a zero weight as 1 (the zero value is the plain mean).
func (c ClassWeights) resolved() ClassWeights {
	if c.Correct == 0 {
		c.Correct = 1
	}
	if c.Wrong == 0 {
		c.Wrong = 1
	}
	return c
}

// plain says the weights are the plain mean (the graph then multiplies by nothing, as before
// weights existed).
func (c ClassWeights) plain() bool { return c.resolved() == ClassWeights{Correct: 1, Wrong: 1} }

// StepBCE is the process-reward loss: binary cross-entropy of each step's logit z against its
// label y, ℓ = −y·log σ(z) − (1−y)·log σ(−z), weighted by its class (cw: Correct where y = 1, Wrong
// where y = 0; the zero value weighs 1) and averaged over the real steps. The metrics are plain
// means over the real steps whatever the class weights.
//
//	logits, labels, w: [rows, steps] float32 (w: 1 on real steps)
//	loss:              scalar Σ w·c(y)·ℓ / Σ w (0 when Σ w = 0)
func StepBCE(logits, labels, w *Node, cw ClassWeights) (*Node, map[string]*Node) {
	for _, x := range []*Node{labels, w} {
		if !x.Shape().EqualDimensions(logits.Shape()) {
			panic(fmt.Sprintf("objective: step bce: logits %s, labels %s, weights %s must share one shape", logits.Shape(), labels.Shape(), w.Shape()))
		}
	}
	w, labels = loss.AsWeights(w, logits), loss.AsWeights(labels, logits)
	n := ReduceAllSum(w)
	den := MaxScalar(n, 1e-9)
	mean := func(x *Node) *Node { return Div(ReduceAllSum(Mul(x, w)), den) }
	one := OnesLike(labels)
	bce := Neg(Add(Mul(labels, loss.LogSigmoid(logits)), Mul(Sub(one, labels), loss.LogSigmoid(Neg(logits)))))
	pred := ConvertDType(GreaterThan(logits, ZerosLike(logits)), logits.DType())
	right := ConvertDType(Equal(pred, labels), logits.DType())
	plainBCE := mean(bce)
	l := plainBCE
	if !cw.plain() {
		// c(y) = Wrong + y·(Correct − Wrong): labels are exactly 0 or 1.
		cw = cw.resolved()
		c := AddScalar(MulScalar(labels, cw.Correct-cw.Wrong), cw.Wrong)
		l = mean(Mul(c, bce))
	}
	return l, map[string]*Node{"step_accuracy": mean(right), "bce": plainBCE, "score": mean(logits), "positive": mean(labels), "steps": n}
}

// PRM is the process-reward-model objective: the value head read at every step's end (StepLogits)
// trained with StepBCE against the step labels, each class weighted by cw. Its input is a
// StepBatch; the model needs a value head. A model with the generative term (Config.RewardLogProb)
// adds α·Σ log π of each step's own tokens to its logit (stepScores); without it a step's score is
// the value head alone.
func PRM(cw ClassWeights) Objective {
	name := "prm-bce"
	if !cw.plain() {
		r := cw.resolved()
		name = fmt.Sprintf("prm-bce[correct=%g wrong=%g]", r.Correct, r.Wrong)
	}
	return Objective{
		Name:    name,
		Metrics: PRMMetrics,
		Build: func(scope *gm.Scope, mc model.Config, in []*Node) (*Node, map[string]*Node) {
			b := stepIn("prm", in)
			if !mc.ValueHead {
				panic("objective prm: the model has no value_head")
			}
			return StepBCE(stepScores(scope, mc, b), b.labels, b.weight, cw)
		},
	}
}

// PRMScoreName prefixes the metric names of PRMScores: row r's step s is
// fmt.Sprintf("%s%03d_%02d", PRMScoreName, r, s).
const PRMScoreName = "prm_"

// PRMScoreKey is the metric name of row r's step s in PRMScores.
func PRMScoreKey(r, s int) string { return fmt.Sprintf("%s%03d_%02d", PRMScoreName, r, s) }

// PRMScores is an evaluation-only objective returning σ(logit) of every (row, step) of a StepBatch
// of rows × steps as a metric (the engine returns named scalars only), so a trained PRM can score
// steps through EvalObjective. Its loss is StepBCE (labels may be zeros).
func PRMScores(rows, steps int) Objective {
	names := make([]string, 0, rows*steps)
	for r := range rows {
		for s := range steps {
			names = append(names, PRMScoreKey(r, s))
		}
	}
	return Objective{
		Name:    fmt.Sprintf("prm-scores[%dx%d]", rows, steps),
		Metrics: names,
		Build: func(scope *gm.Scope, mc model.Config, in []*Node) (*Node, map[string]*Node) {
			b := stepIn("prm-scores", in)
			if d := b.ends.Shape(); d.Dim(0) != rows || d.Dim(1) != steps {
				panic(fmt.Sprintf("objective prm-scores: ends %s, want [%d, %d]", d, rows, steps))
			}
			logits := stepScores(scope, mc, b)
			l, _ := StepBCE(logits, b.labels, b.weight, ClassWeights{})
			p := Sigmoid(logits)
			out := make(map[string]*Node, len(names))
			for r := range rows {
				for s := range steps {
					out[PRMScoreKey(r, s)] = Reshape(Slice(p, AxisElem(r), AxisElem(s)))
				}
			}
			return l, out
		},
	}
}
