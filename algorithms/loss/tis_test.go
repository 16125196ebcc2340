package loss

import (
	"math"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive

	"github.com/temperml/temper/algorithms/loss/losscfg"
)

func TestTISWeightsHandComputed(t *testing.T) {
	// old − behaviour log-ratios: ln 3 (truncated to C = 2), ln 1.9, 0, ln 0.5, then padding (ln 100).
	old := [][]float32{{float32(math.Log(3)), float32(math.Log(1.9)), -1, float32(math.Log(0.5)), float32(math.Log(100))}}
	beh := [][]float32{{0, 0, -1, 0, 0}}
	mask := [][]float32{{1, 1, 1, 1, 0}}
	out := pgExec(t, func(in []*Node) []*Node {
		w, m := TISWeights(in[0], in[1], in[2], 2)
		return []*Node{w, m["tis_truncated_frac"], m["tis_weight_mean"], Gradient(ReduceAllSum(w), in[0])[0]}
	}, old, beh, mask)
	pgCheckMatrix(t, "w", out[0], [][]float64{{2, 1.9, 1, 0.5, 2}})
	pgCheckScalar(t, "tis_truncated_frac", out[1][0], 0.25)
	pgCheckScalar(t, "tis_weight_mean", out[2][0], (2+1.9+1+0.5)/4)
	pgCheckMatrix(t, "dw/dold (constant)", out[3], [][]float64{{0, 0, 0, 0, 0}})
}

func TestTISWeightsMatchesReference(t *testing.T) {
	old, beh, mask := pgF64(pgOld), pgF64(pgBeh), pgF64(pgMask)
	for _, c := range []float64{1, 1.5, 2, 10} {
		out := pgExec(t, func(in []*Node) []*Node {
			w, m := TISWeights(in[0], in[1], in[2], c)
			return []*Node{w, m["tis_truncated_frac"], m["tis_weight_mean"]}
		}, pgOld, pgBeh, pgMask)
		w := pgMap(3, 4, func(i, t int) float64 { return math.Min(math.Exp(old[i][t]-beh[i][t]), c) })
		trunc := pgMap(3, 4, func(i, t int) float64 {
			if math.Exp(old[i][t]-beh[i][t]) > c {
				return 1
			}
			return 0
		})
		pgCheckMatrix(t, "w", out[0], w)
		pgCheckScalar(t, "tis_truncated_frac", out[1][0], pgRefAggregate(trunc, mask, losscfg.AggTokenMean, 0))
		pgCheckScalar(t, "tis_weight_mean", out[2][0], pgRefAggregate(w, mask, losscfg.AggTokenMean, 0))
	}
}
