package loss

import (
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/support/exceptions"

	"github.com/temperml/temper/algorithms/loss/losscfg"
)

// Aggregate reduces per-token values to a scalar under mask with the given mode.
//
//	perToken: [batch, seq] float; mask: [batch, seq] (Bool or numeric weights) → scalar
//
// With m the mask, n_i = Σ_t m_it the counted tokens of row i, and R = {i : n_i > 0}:
//
//	token-mean:              Σ_{i,t} m_it·x_it / Σ_i n_i
//	seq-mean-token-mean:     (1/|R|) Σ_{i∈R} Σ_t m_it·x_it / n_i
//	seq-mean-token-sum:      (1/|R|) Σ_{i∈R} Σ_t m_it·x_it
//	seq-mean-token-sum-norm: (1/|R|) Σ_{i∈R} Σ_t m_it·x_it / maxLen
//
// Rows with no counted token (all-padding rows that keep a compiled batch shape) are left out of the
// row count, so padding a batch never changes its loss; an all-zero mask gives 0, not NaN.
// maxLen is used by seq-mean-token-sum-norm only; maxLen ≤ 0 there means the padded length seq
// (what verl does). Keep it constant across steps (e.g. the generation budget) so that the scale of
// the loss does not move with the batch. Panics on an unknown mode or mismatched shapes.
func Aggregate(perToken, mask *Node, mode losscfg.AggMode, maxLen int) *Node {
	checkSame("Aggregate", perToken, mask)
	if perToken.Rank() != 2 {
		exceptions.Panicf("loss: Aggregate: perToken %s: want [batch, seq]", perToken.Shape())
	}
	w := AsWeights(mask, perToken)
	switch mode {
	case losscfg.AggTokenMean:
		return Div(ReduceAllSum(Mul(perToken, w)), MaxScalar(ReduceAllSum(w), 1))
	case losscfg.AggSeqMeanTokenMean:
		return rowMean(SeqMean(perToken, w), w)
	case losscfg.AggSeqMeanTokenSum:
		return rowMean(SeqSum(perToken, w), w)
	case losscfg.AggSeqMeanTokenSumNorm:
		if maxLen <= 0 {
			maxLen = perToken.Shape().Dim(1)
		}
		return rowMean(DivScalar(SeqSum(perToken, w), maxLen), w)
	}
	panic(mode.Validate())
}

// rowMean is the mean of perRow [batch] over the rows with at least one counted token in w [batch, seq].
func rowMean(perRow, w *Node) *Node {
	present := ConvertDType(GreaterThan(ReduceSum(w, -1), ScalarZero(w.Graph(), w.DType())), perRow.DType())
	return Div(ReduceAllSum(Mul(perRow, present)), MaxScalar(ReduceAllSum(present), 1))
}

// tokenMean is the token-mean of x under w, the form every per-token metric here is reported in.
func tokenMean(x, w *Node) *Node {
	return Aggregate(x, w, losscfg.AggTokenMean, 0)
}
