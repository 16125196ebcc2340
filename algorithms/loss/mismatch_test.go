package loss

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
)

// TestMismatchOfHandComputed: d = trainer − behaviour; the figures are worked out by hand.
func TestMismatchOfHandComputed(t *testing.T) {
	ln := math.Log
	cases := []struct {
		name              string
		trainer, behavior []float64
		mask              []bool
		want              MismatchStats
		absMean, k3, out  float64
	}{
		{name: "empty", want: MismatchStats{}},
		{name: "all masked", trainer: []float64{1, 2}, behavior: []float64{0, 0}, mask: []bool{false, false}},
		{name: "identical: zero mismatch", trainer: []float64{-0.5, -2, -7}, behavior: []float64{-0.5, -2, -7},
			want: MismatchStats{Tokens: 3}},
		// d = ln 2 (ratio 2: inside [0.5, 2]), −ln 4 (ratio 1/4: outside), 0.1; the fourth is masked.
		// k3(d) = e^d − 1 − d: 2−1−ln 2, 1/4−1+ln 4, e^0.1−1.1.
		{name: "three counted, one out", trainer: []float64{ln(2) - 1, -ln(4) - 1, -0.9, 50}, behavior: []float64{-1, -1, -1, 0},
			mask: []bool{true, true, true, false},
			want: MismatchStats{Tokens: 3, SumAbs: ln(2) + ln(4) + 0.1, MaxAbs: ln(4),
				SumK3: (1 - ln(2)) + (ln(4) - 0.75) + (math.Exp(0.1) - 1.1), Out: 1},
			absMean: (ln(2) + ln(4) + 0.1) / 3, k3: ((1 - ln(2)) + (ln(4) - 0.75) + (math.Exp(0.1) - 1.1)) / 3, out: 1.0 / 3},
		// d = 30 is clamped to 20 for k3 only: e^20 − 21.
		{name: "huge log-ratio", trainer: []float64{30}, behavior: []float64{0},
			want:    MismatchStats{Tokens: 1, SumAbs: 30, MaxAbs: 30, SumK3: math.Exp(20) - 21, Out: 1},
			absMean: 30, k3: math.Exp(20) - 21, out: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := MismatchOf(c.trainer, c.behavior, c.mask)
			if err != nil {
				t.Fatal(err)
			}
			if got.Tokens != c.want.Tokens || got.Out != c.want.Out || !near12(got.SumAbs, c.want.SumAbs) ||
				!near12(got.MaxAbs, c.want.MaxAbs) || !near12(got.SumK3, c.want.SumK3) {
				t.Errorf("stats %+v, want %+v", got, c.want)
			}
			if !near12(got.AbsMean(), c.absMean) || !near12(got.K3(), c.k3) || !near12(got.OutFrac(), c.out) {
				t.Errorf("means %g %g %g, want %g %g %g", got.AbsMean(), got.K3(), got.OutFrac(), c.absMean, c.k3, c.out)
			}
			m := got.Metrics("mismatch_fresh_")
			for i, k := range MismatchNames("mismatch_fresh_") {
				if _, ok := m[k]; !ok {
					t.Errorf("metric %d %q missing from %v", i, k, m)
				}
			}
			if len(m) != len(MismatchNames("")) {
				t.Errorf("metrics %v, want the %d of MismatchNames", m, len(MismatchNames("")))
			}
		})
	}
}

func near12(a, b float64) bool { return near(a, b, 1e-12) }

func TestMismatchOfErrorsAndMerge(t *testing.T) {
	if _, err := MismatchOf([]float32{1, 2}, []float32{1}, nil); err == nil || !strings.Contains(err.Error(), "2 trainer log-probs, 1 behaviour") {
		t.Errorf("length mismatch: %v", err)
	}
	if _, err := MismatchOf([]float32{1, 2}, []float32{1, 2}, []bool{true}); err == nil || !strings.Contains(err.Error(), "mask has 1 entries for 2") {
		t.Errorf("mask length: %v", err)
	}
	// Merging per-row measurements equals measuring the rows together; float32 inputs work too.
	a, _ := MismatchOf([]float32{-1, -2}, []float32{-1.5, -2}, nil)
	b, _ := MismatchOf([]float32{-0.1, -3, -4}, []float32{-0.2, -1, -4}, []bool{true, true, false})
	all, _ := MismatchOf([]float32{-1, -2, -0.1, -3, -4}, []float32{-1.5, -2, -0.2, -1, -4}, []bool{true, true, true, true, false})
	if got := a.Merge(b); got.Tokens != all.Tokens || got.Out != all.Out || !near12(got.SumAbs, all.SumAbs) ||
		!near12(got.MaxAbs, all.MaxAbs) || !near12(got.SumK3, all.SumK3) {
		t.Errorf("merge %+v, want %+v", got, all)
	}
	if (MismatchStats{}).Merge(MismatchStats{}) != (MismatchStats{}) {
		t.Error("empty merge is not empty")
	}
	// d = 0.5, 0, 0.1, −2: k3 = (e^0.5 − 1.5) + 0 + (e^0.1 − 1.1) + (e^−2 + 1); ratio e^−2 is out.
	if all.Tokens != 4 || all.Out != 1 || !near(all.SumAbs, 2.6, 1e-7) || all.MaxAbs != 2 ||
		!near(all.SumK3, math.Exp(0.5)-1.5+math.Exp(0.1)-1.1+math.Exp(-2)+1, 1e-7) {
		t.Errorf("float32 rows: %+v", all)
	}
	js, err := json.Marshal(all)
	var back MismatchStats
	if err == nil {
		err = json.Unmarshal(js, &back)
	}
	if err != nil || back != all || !strings.Contains(string(js), `"tokens":4,"sum_abs":`) {
		t.Errorf("json %s → %+v, %v", js, back, err)
	}
}

// TestMismatchMetricsMatchesMismatchOf: the graph form agrees with the plain-Go one on the shared
// data (junk in the padding), Bool and float masks, and is all zeros for an empty batch.
func TestMismatchMetricsMatchesMismatchOf(t *testing.T) {
	old, beh, mask := pgF64(pgOld), pgF64(pgBeh), pgF64(pgMask)
	var want MismatchStats
	boolMask := make([][]bool, len(mask))
	for i := range old {
		boolMask[i] = pgBoolRow(mask[i])
		row, err := MismatchOf(old[i], beh[i], boolMask[i])
		if err != nil {
			t.Fatal(err)
		}
		want = want.Merge(row)
	}
	names := MismatchNames(MismatchPrefix)
	run := func(m any, trainer, behaviour [][]float32) [][]float32 {
		return pgExec(t, func(in []*Node) []*Node {
			met := MismatchMetrics(in[0], in[1], in[2], MismatchPrefix)
			if len(met) != len(names) {
				t.Errorf("metrics %d, want %d", len(met), len(names))
			}
			res := make([]*Node, len(names))
			for i, k := range names {
				res[i] = met[k]
			}
			return res
		}, trainer, behaviour, m)
	}
	for _, m := range []any{pgMask, boolMask} {
		got := run(m, pgOld, pgBeh)
		wantM := want.Metrics(MismatchPrefix)
		for i, k := range names {
			pgCheckScalar(t, k, got[i][0], wantM[k])
		}
	}
	if want.Out != 1 || want.Tokens != 9 {
		t.Fatalf("shared data: %+v, want 9 tokens, 1 outside [0.5, 2] (ratio e)", want)
	}
	zero := [][]float32{{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}}
	for i, v := range run(zero, pgOld, pgBeh) {
		if v[0] != 0 {
			t.Errorf("empty batch: %s = %g, want 0", names[i], v[0])
		}
	}
}
