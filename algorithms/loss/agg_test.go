package loss

import (
	"fmt"
	"math"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/algorithms/testbackend"
)

// pgExec is run1 for inputs of rank 1 ([]float32) or 2 ([][]float32); outputs are flattened float32.
// surrogateExec runs a per-token surrogate on (logp, old, adv, mask) and returns its loss, the
// gradient with respect to logp of the loss aggregated by agg, then its metrics, with their names
// (sorted).
func surrogateExec(t *testing.T, agg losscfg.AggMode, surrogate func(logp, old, adv, mask *Node) (*Node, map[string]*Node),
	logp, old, adv, mask any) (out [][]float32, keys []string) {
	t.Helper()
	out = pgExec(t, func(in []*Node) []*Node {
		l, m := surrogate(in[0], in[1], in[2], in[3])
		keys = pgSortedKeys(m)
		res := []*Node{l, Gradient(Aggregate(l, in[3], agg, 0), in[0])[0]}
		for _, k := range keys {
			res = append(res, m[k])
		}
		return res
	}, logp, old, adv, mask)
	return out, keys
}

func pgExec(t *testing.T, fn func(in []*Node) []*Node, inputs ...any) [][]float32 {
	t.Helper()
	args := make([]any, len(inputs))
	for i, x := range inputs {
		switch v := x.(type) {
		case []float32:
			args[i] = tensors.FromFlatDataAndDimensions(v, len(v))
		case [][]bool:
			flat := []bool{}
			for _, row := range v {
				flat = append(flat, row...)
			}
			args[i] = tensors.FromFlatDataAndDimensions(flat, len(v), len(v[0]))
		case [][]float32:
			flat := []float32{}
			for _, row := range v {
				flat = append(flat, row...)
			}
			args[i] = tensors.FromFlatDataAndDimensions(flat, len(v), len(v[0]))
		default:
			t.Fatalf("pgExec: input %d has type %T", i, x)
		}
	}
	outs := MustExecOnceN(testbackend.Sequential(), fn, args...)
	res := make([][]float32, len(outs))
	for i, o := range outs {
		res[i] = tensors.MustCopyFlatData[float32](o)
	}
	return res
}

// pgClose reports whether a float32 graph output matches a float64 reference to 1e-5 (relative above 1).
func pgClose(got float32, want float64) bool {
	return math.Abs(float64(got)-want) <= 1e-5*math.Max(1, math.Abs(want))
}

func pgCheckScalar(t *testing.T, name string, got float32, want float64) {
	t.Helper()
	if !pgClose(got, want) {
		t.Errorf("%s = %.7g, want %.7g", name, got, want)
	}
}

func pgCheckMatrix(t *testing.T, name string, got []float32, want [][]float64) {
	t.Helper()
	k := 0
	for i, row := range want {
		for j, w := range row {
			if !pgClose(got[k], w) {
				t.Errorf("%s[%d][%d] = %.7g, want %.7g", name, i, j, got[k], w)
			}
			k++
		}
	}
}

func pgF64(x [][]float32) [][]float64 {
	out := make([][]float64, len(x))
	for i, row := range x {
		out[i] = make([]float64, len(row))
		for j, v := range row {
			out[i][j] = float64(v)
		}
	}
	return out
}

// pgRefAggregate is the plain-Go reference of Aggregate.
func pgRefAggregate(x, mask [][]float64, mode losscfg.AggMode, maxLen int) float64 {
	if maxLen <= 0 {
		maxLen = len(x[0])
	}
	if mode == losscfg.AggTokenMean {
		s, n := 0.0, 0.0
		for i := range x {
			for t := range x[i] {
				s += x[i][t] * mask[i][t]
				n += mask[i][t]
			}
		}
		return s / math.Max(n, 1)
	}
	total, rows := 0.0, 0.0
	for i := range x {
		s, n := 0.0, 0.0
		for t := range x[i] {
			s += x[i][t] * mask[i][t]
			n += mask[i][t]
		}
		if n == 0 {
			continue
		}
		rows++
		switch mode {
		case losscfg.AggSeqMeanTokenMean:
			total += s / n
		case losscfg.AggSeqMeanTokenSum:
			total += s
		case losscfg.AggSeqMeanTokenSumNorm:
			total += s / float64(maxLen)
		default:
			panic(mode)
		}
	}
	return total / math.Max(rows, 1)
}

func TestAggregateHandComputed(t *testing.T) {
	// Rows: tokens [1 2 3 | pad] and [4 5 | pad pad], then an all-padding row that must not count.
	x := [][]float32{{1, 2, 3, 100}, {4, 5, 100, 100}, {7, 7, 7, 7}}
	mask := [][]float32{{1, 1, 1, 0}, {1, 1, 0, 0}, {0, 0, 0, 0}}
	cases := []struct {
		mode   losscfg.AggMode
		maxLen int
		want   float64
	}{
		{losscfg.AggTokenMean, 0, 15.0 / 5},                    // (6+9)/5 tokens
		{losscfg.AggSeqMeanTokenMean, 0, (2 + 4.5) / 2},        // row means 2 and 4.5
		{losscfg.AggSeqMeanTokenSum, 0, (6 + 9) / 2.0},         // row sums 6 and 9
		{losscfg.AggSeqMeanTokenSumNorm, 10, (0.6 + 0.9) / 2},  // sums over the constant 10
		{losscfg.AggSeqMeanTokenSumNorm, 0, (1.5 + 2.25) / 2},  // maxLen 0 → padded length 4
		{losscfg.AggSeqMeanTokenSumNorm, -3, (1.5 + 2.25) / 2}, // negative: same
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%d", c.mode, c.maxLen), func(t *testing.T) {
			got := pgExec(t, func(in []*Node) []*Node { return []*Node{Aggregate(in[0], in[1], c.mode, c.maxLen)} }, x, mask)[0][0]
			pgCheckScalar(t, "Aggregate", got, c.want)
			pgCheckScalar(t, "pgRefAggregate", float32(pgRefAggregate(pgF64(x), pgF64(mask), c.mode, c.maxLen)), c.want)
		})
	}
}

func TestAggregateMatchesReference(t *testing.T) {
	x := [][]float32{{0.3, -1.2, 2.5, 9, 9}, {-0.7, 0.1, 0.4, 1.9, -2.2}, {5, 5, 5, 5, 5}, {1.1, 9, 9, 9, 9}}
	masks := map[string][][]float32{
		"padded": {{1, 1, 1, 0, 0}, {1, 1, 1, 1, 1}, {0, 0, 0, 0, 0}, {1, 0, 0, 0, 0}},
		"full":   {{1, 1, 1, 1, 1}, {1, 1, 1, 1, 1}, {1, 1, 1, 1, 1}, {1, 1, 1, 1, 1}},
		"empty":  {{0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}},
		"prompt": {{0, 0, 1, 1, 0}, {0, 1, 1, 1, 1}, {0, 0, 0, 1, 1}, {0, 1, 1, 0, 0}},
	}
	for name, mask := range masks {
		for _, mode := range losscfg.AggModes {
			for _, maxLen := range []int{0, 8} {
				got := pgExec(t, func(in []*Node) []*Node { return []*Node{Aggregate(in[0], in[1], mode, maxLen)} }, x, mask)[0][0]
				pgCheckScalar(t, fmt.Sprintf("%s/%s/%d", name, mode, maxLen), got, pgRefAggregate(pgF64(x), pgF64(mask), mode, maxLen))
			}
		}
	}
}

func TestAggregateBoolMask(t *testing.T) {
	x := [][]float32{{1, 2, 3, 100}, {4, 5, 100, 100}}
	mask := [][]bool{{true, true, true, false}, {true, true, false, false}}
	for _, mode := range losscfg.AggModes {
		got := pgExec(t, func(in []*Node) []*Node { return []*Node{Aggregate(in[0], in[1], mode, 10)} }, x, mask)[0][0]
		want := pgRefAggregate(pgF64(x), [][]float64{{1, 1, 1, 0}, {1, 1, 0, 0}}, mode, 10)
		pgCheckScalar(t, string(mode), got, want)
	}
}

func TestAggModeValidate(t *testing.T) {
	for _, m := range losscfg.AggModes {
		if err := m.Validate(); err != nil {
			t.Errorf("%s: %v", m, err)
		}
	}
	if err := losscfg.AggMode("token_mean").Validate(); err == nil {
		t.Error("token_mean accepted")
	}
}
