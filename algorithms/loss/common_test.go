package loss

import (
	"math"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/temperml/temper/algorithms/testbackend"
)

// run1 evaluates a graph function of float32 [batch, seq] inputs and returns its float32 outputs.
func run1(t *testing.T, fn func(in []*Node) []*Node, inputs ...[][]float32) [][]float32 {
	t.Helper()
	args := make([]any, len(inputs))
	for i, x := range inputs {
		flat := []float32{}
		for _, row := range x {
			flat = append(flat, row...)
		}
		args[i] = tensors.FromFlatDataAndDimensions(flat, len(x), len(x[0]))
	}
	outs := MustExecOnceN(testbackend.Sequential(), func(in []*Node) []*Node { return fn(in) }, args...)
	res := make([][]float32, len(outs))
	for i, o := range outs {
		res[i] = tensors.MustCopyFlatData[float32](o)
	}
	return res
}

func TestLogSigmoidAndSeqReductions(t *testing.T) {
	xs := [][]float32{{-100, -3, 0, 2.5, 100}}
	got := run1(t, func(in []*Node) []*Node { return []*Node{LogSigmoid(in[0])} }, xs)[0]
	for i, x := range xs[0] {
		want := -math.Log1p(math.Exp(-float64(x)))
		if math.Abs(float64(got[i])-want) > 1e-5*math.Max(1, math.Abs(want)) {
			t.Errorf("LogSigmoid(%v) = %v, want %v", x, got[i], want)
		}
	}
	out := run1(t, func(in []*Node) []*Node { return []*Node{SeqSum(in[0], in[1]), SeqMean(in[0], in[1])} },
		[][]float32{{1, 2, 3}, {4, 5, 6}}, [][]float32{{1, 1, 0}, {0, 0, 0}})
	if out[0][0] != 3 || out[0][1] != 0 || out[1][0] != 1.5 || out[1][1] != 0 {
		t.Errorf("SeqSum %v SeqMean %v, want [3 0] [1.5 0]", out[0], out[1])
	}
}
