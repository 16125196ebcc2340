package model

import (
	"math"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive

	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/testbackend"
)

// TestSoftmaxGradient: the fused softmax's registered gradient equals the gradient through
// GoMLX's decomposed Softmax, for a row with masked (-1e9) entries too, and its values are the
// plain-Go softmax.
func TestSoftmaxGradient(t *testing.T) {
	x := [][]float32{{0.5, -1, 2, 0.25}, {3, maskedScore, 1, maskedScore}, {-2, -2, -2, -2}}
	w := [][]float32{{1, 2, 3, 4}, {-1, 0.5, 2, 7}, {0.3, -0.2, 0.1, 0.9}}
	outs := MustExecOnceN(testbackend.Sequential(), func(xn, wn *Node) []*Node {
		ours := softmax(xn)
		ref := Softmax(xn, -1)
		gOurs := Gradient(ReduceAllSum(Mul(ours, wn)), xn)[0]
		gRef := Gradient(ReduceAllSum(Mul(ref, wn)), xn)[0]
		return []*Node{ours, gOurs, gRef}
	}, x, w)
	y := outs[0].Value().([][]float32)
	gOurs := outs[1].Value().([][]float32)
	gRef := outs[2].Value().([][]float32)
	for i, row := range x {
		for j := range row {
			if want := math.Exp(sample.LogProb(row, j)); math.Abs(float64(y[i][j])-want) > 1e-6 {
				t.Errorf("softmax[%d][%d] = %g, want %g", i, j, y[i][j], want)
			}
			if d := math.Abs(float64(gOurs[i][j] - gRef[i][j])); d > 1e-6 {
				t.Errorf("grad[%d][%d] = %g, decomposed gives %g", i, j, gOurs[i][j], gRef[i][j])
			}
		}
	}
}
