package model

import (
	"regexp"
	"strconv"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // GoMLX graph code reads best unqualified.
	"github.com/gomlx/gomlx/support/exceptions"
)

// softmax over the last axis: x [..., n] → [..., n].
//
// It uses the backend's fused softmax directly, with the analytic gradient
// dx = y ⊙ (dy − Σ dy ⊙ y) registered below. GoMLX's Softmax pairs the fused forward with the
// decomposed graph for its gradient, so the backward pass recomputed max, exp, sum and a
// broadcasting divide (with their own gradients) over every attention score: on the Go backend
// that was the largest non-matmul cost of a training step. Backends without a fused softmax get
// GoMLX's Softmax.
func softmax(x *Node) *Node {
	var y *Node
	err := exceptions.TryCatch[error](func() { y = BackendFusedSoftmax(x, x.Rank()-1) })
	if err != nil {
		if compute.IsNotImplemented(err) {
			return Softmax(x, -1)
		}
		panic(err)
	}
	return y
}

// fusedSoftmaxAxis reads a FusedSoftmax node's axis from its description (GoMLX keeps the
// parameter unexported); the gradient test fails if that format changes.
var fusedSoftmaxAxis = regexp.MustCompile(`FusedSoftmax\(x=\[#\d+\], axis=(\d+)\)`)

func init() {
	// Only FusedSoftmax nodes built without a decomposed alternative reach this table (GoMLX's
	// own Softmax routes its gradient through the decomposition), so this adds a gradient where
	// there was none.
	VJPRegistration[NodeTypeFusedSoftmax] = func(node *Node, v []*Node, _ shapes.Shape) []*Node {
		m := fusedSoftmaxAxis.FindStringSubmatch(node.String())
		if m == nil {
			exceptions.Panicf("model: fused softmax gradient: cannot read the axis of %s", node)
		}
		axis, _ := strconv.Atoi(m[1])
		dy := v[0]
		return []*Node{Mul(node, Sub(dy, ReduceAndKeep(Mul(dy, node), ReduceSum, axis)))}
	}
}
