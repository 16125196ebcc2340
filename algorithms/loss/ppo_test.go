package loss

import (
	"fmt"
	"math"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive

	"github.com/temperml/temper/algorithms/loss/losscfg"
)

func TestValueLossHandComputed(t *testing.T) {
	cases := []struct {
		name                 string
		v, old, ret, eps     float64
		want, wantGrad, clip float64
	}{
		// V moved past V_old+ε toward R: the clipped term (0.9 − 2)² = 1.21 beats (1 − 2)² = 1; no gradient.
		{"clipped term active", 1, 0.8, 2, 0.1, 0.605, 0, 1},
		// V moved past V_old+ε away from R: the unclipped term (1 − 0)² = 1 beats 0.81.
		{"unclipped term active", 1, 0.8, 0, 0.1, 0.5, 1, 0},
		{"inside the clip range", 0.85, 0.8, 2, 0.1, 0.5 * 1.15 * 1.15, -1.15, 0},
		{"no clipping", 1, 0.8, 2, 0, 0.5, -1, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := pgExec(t, func(in []*Node) []*Node {
				l, m := ValueLoss(in[0], in[1], in[2], in[3], c.eps)
				return []*Node{l, Gradient(ReduceAllSum(l), in[0])[0], m["value_clip_frac"]}
			}, [][]float32{{float32(c.v)}}, [][]float32{{float32(c.old)}}, [][]float32{{float32(c.ret)}}, [][]float32{{1}})
			pgCheckScalar(t, "loss", out[0][0], c.want)
			pgCheckScalar(t, "dloss/dV", out[1][0], c.wantGrad)
			pgCheckScalar(t, "value_clip_frac", out[2][0], c.clip)
			l, _ := pgRefValueLoss(c.v, c.old, c.ret, c.eps)
			pgCheckScalar(t, "ref", float32(l), c.want)
		})
	}
}

func TestValueLossMatchesReference(t *testing.T) {
	val, oldVal, ret, mask := pgF64(pgVal), pgF64(pgOldVal), pgF64(pgRet), pgF64(pgMask)
	for _, eps := range []float64{0, 0.07, 0.2, 1} { // no |V − V_old| sits exactly on ε
		out := pgExec(t, func(in []*Node) []*Node {
			l, m := ValueLoss(in[0], in[1], in[2], in[3], eps)
			return []*Node{l, m["value_clip_frac"]}
		}, pgVal, pgOldVal, pgRet, pgMask)
		want := pgMap(3, 4, func(i, t int) float64 { l, _ := pgRefValueLoss(val[i][t], oldVal[i][t], ret[i][t], eps); return l })
		frac := pgMap(3, 4, func(i, t int) float64 {
			if _, c := pgRefValueLoss(val[i][t], oldVal[i][t], ret[i][t], eps); c {
				return 1
			}
			return 0
		})
		pgCheckMatrix(t, "value loss", out[0], want)
		pgCheckScalar(t, fmt.Sprint("value_clip_frac eps=", eps), out[1][0], pgRefAggregate(frac, mask, losscfg.AggTokenMean, 0))
	}
}

func TestEntropyBonus(t *testing.T) {
	ent, mask := pgF64(pgEnt), pgF64(pgMask)
	for _, mode := range losscfg.AggModes {
		out := pgExec(t, func(in []*Node) []*Node {
			b := EntropyBonus(in[0], in[1], 0.01, mode, 0)
			return []*Node{b, Gradient(b, in[0])[0]}
		}, pgEnt, pgMask)
		pgCheckScalar(t, string(mode), out[0][0], -0.01*pgRefAggregate(ent, mask, mode, 0))
		for k, g := range out[1] { // more entropy lowers the loss on counted tokens only
			if counted := pgMask[k/4][k%4] != 0; (counted && !(g < 0)) || (!counted && g != 0) || math.IsNaN(float64(g)) {
				t.Errorf("%s: d bonus/d H[%d] = %g", mode, k, g)
			}
		}
	}
}
