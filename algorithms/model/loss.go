package model

import (
	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/support/exceptions"
)

// logSumExp over the last axis with the max subtracted (stable); the max is a constant for the
// gradient, which is exact because logsumexp's gradient does not depend on the shift.
//
//	logits: [..., vocab] → [...]
func logSumExp(logits *Node) *Node {
	m := StopGradient(ReduceAndKeep(logits, ReduceMax, -1))
	s := ReduceSum(Exp(Sub(logits, m)), -1)
	return Add(Log(s), Squeeze(m, -1))
}

// TokenLogProbs returns log p(target) under softmax(logits), stable in float32.
//
//	logits:  [batch, seq, vocab] float
//	targets: [batch, seq] int
//	logp:    [batch, seq]
//
// Targets are aligned with logits (the caller shifts for next-token prediction; see NextTokenLogProbs).
func TokenLogProbs(logits, targets *Node) *Node {
	checkAligned(logits, targets)
	vocab := logits.Shape().Dim(-1)
	oh := OneHot(targets, vocab, logits.DType())
	picked := ReduceSum(Mul(oh, logits), -1)
	return Sub(picked, logSumExp(logits))
}

// NextTokenLogProbs shifts for next-token prediction: logp[:, t] = log p(tokens[:, t+1] | ≤ t).
//
//	logits: [batch, seq, vocab], tokens: [batch, seq] → [batch, seq-1]
func NextTokenLogProbs(logits, tokens *Node) *Node {
	seq := logits.Shape().Dim(1)
	return TokenLogProbs(SliceAxis(logits, 1, AxisRange(0, seq-1)), SliceAxis(tokens, 1, AxisRange(1, seq)))
}

// Entropy returns the entropy of softmax(logits) per position: logits [batch, seq, vocab] → [batch, seq].
func Entropy(logits *Node) *Node {
	lse := Reshape(logSumExp(logits), append(logits.Shape().Dimensions[:logits.Rank()-1:logits.Rank()-1], 1)...)
	logp := Sub(logits, lse)
	return Neg(ReduceSum(Mul(Exp(logp), logp), -1))
}

// CrossEntropy is the mean of -log p(target) over the positions where mask is non-zero (aligned
// targets, no shift). An all-zero mask gives 0, not NaN.
//
//	logits: [batch, seq, vocab], targets: [batch, seq] int, mask: [batch, seq] (Bool or numeric weights)
//	loss: scalar
func CrossEntropy(logits, targets, mask *Node) *Node {
	nll := Neg(TokenLogProbs(logits, targets))
	w := mask
	if w.DType() == dtypes.Bool {
		w = ConvertDType(w, nll.DType())
	} else if w.DType() != nll.DType() {
		w = ConvertDType(w, nll.DType())
	}
	total := ReduceAllSum(Mul(nll, w))
	count := MaxScalar(ReduceAllSum(w), 1e-9)
	return Div(total, count)
}

// NextTokenLoss is the masked next-token cross-entropy: logits[:, t] predicts tokens[:, t+1], and
// mask[:, t+1] says whether that target counts (e.g. 1 on completion tokens, 0 on prompt and padding).
//
//	logits: [batch, seq, vocab], tokens: [batch, seq], mask: [batch, seq] → scalar mean over counted targets
func NextTokenLoss(logits, tokens, mask *Node) *Node {
	seq := logits.Shape().Dim(1)
	return CrossEntropy(SliceAxis(logits, 1, AxisRange(0, seq-1)),
		SliceAxis(tokens, 1, AxisRange(1, seq)), SliceAxis(mask, 1, AxisRange(1, seq)))
}

func checkAligned(logits, targets *Node) {
	if logits.Rank() != targets.Rank()+1 {
		exceptions.Panicf("model: logits %s and targets %s: want logits = targets + [vocab]", logits.Shape(), targets.Shape())
	}
	for i := range targets.Rank() {
		if logits.Shape().Dim(i) != targets.Shape().Dim(i) {
			exceptions.Panicf("model: logits %s and targets %s: want logits = targets + [vocab]", logits.Shape(), targets.Shape())
		}
	}
	if !targets.DType().IsInt() {
		exceptions.Panicf("model: targets %s must be integer", targets.Shape())
	}
}
