package loss

import (
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/support/exceptions"
)

// Metrics are named scalar graph outputs reported next to a loss (e.g. "reward_margin").
type Metrics map[string]*Node

// AsWeights converts a Bool or numeric mask to the dtype of like.
func AsWeights(mask, like *Node) *Node {
	if mask.DType() != like.DType() {
		return ConvertDType(mask, like.DType())
	}
	return mask
}

// SeqSum is the masked sum over the sequence axis: x, mask [batch, seq] → [batch].
func SeqSum(x, mask *Node) *Node {
	checkSame("SeqSum", x, mask)
	return ReduceSum(Mul(x, AsWeights(mask, x)), -1)
}

// SeqLen is the number of counted tokens per row, at least 1 so means never divide by zero:
// mask [batch, seq] → [batch] (dtype of like).
func SeqLen(mask, like *Node) *Node {
	return MaxScalar(ReduceSum(AsWeights(mask, like), -1), 1)
}

// SeqMean is the masked mean over the sequence axis: x, mask [batch, seq] → [batch].
func SeqMean(x, mask *Node) *Node {
	return Div(SeqSum(x, mask), SeqLen(mask, x))
}

// LogSigmoid is log σ(x) = -softplus(-x), stable for large |x|: min(x,0) - log(1+exp(-|x|)).
func LogSigmoid(x *Node) *Node {
	return Sub(MinScalar(x, 0), Log1P(Exp(Neg(Abs(x)))))
}

// Mean is the mean of a [batch] vector.
func Mean(x *Node) *Node { return ReduceAllMean(x) }

func checkSame(op string, a, b *Node) {
	if !a.Shape().EqualDimensions(b.Shape()) {
		exceptions.Panicf("loss: %s: shapes %s and %s differ", op, a.Shape(), b.Shape())
	}
}
