package loss

import (
	"fmt"
	"math"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive

	"github.com/temperml/temper/algorithms/loss/losscfg"
)

// ---- plain-Go float64 reference of OffPolicyCorrection, written in ratio space (the graph tests the
// bounds on the log side) ----

// corrRef is the reference's result: weight (1 where the mode has none), keep mask and metrics.
type corrRef struct {
	w, keep [][]float64
	m       map[string]float64
}

func refCorrection(old, beh, mask [][]float64, c losscfg.Correction) corrRef {
	c = c.WithDefaults()
	b, s := len(old), len(old[0])
	ratio := pgMap(b, s, func(i, t int) float64 { return math.Exp(pgRefClip(old[i][t]-beh[i][t], -20, 20)) })
	tokMean := func(x [][]float64) float64 { return pgRefAggregate(x, mask, losscfg.AggTokenMean, 0) }
	ones := pgMap(b, s, func(i, t int) float64 { return 1 })
	switch c.Mode {
	case losscfg.CorrectionNone:
		return corrRef{w: ones, keep: mask, m: map[string]float64{}}
	case losscfg.CorrectionTIS:
		w := pgMap(b, s, func(i, t int) float64 { return math.Min(math.Exp(old[i][t]-beh[i][t]), c.High) })
		trunc := pgMap(b, s, func(i, t int) float64 { return b01(math.Exp(old[i][t]-beh[i][t]) > c.High) })
		return corrRef{w: w, keep: mask, m: map[string]float64{"tis_weight_mean": tokMean(w), "tis_truncated_frac": tokMean(trunc)}}
	}
	judged := ratio // per token, or the row's geometric mean broadcast
	if c.Mode == losscfg.CorrectionGeoMask {
		judged = pgMap(b, s, func(i, t int) float64 {
			prod, n := 1.0, 0.0
			for u := range old[i] {
				if mask[i][u] > 0 {
					prod *= ratio[i][u]
					n++
				}
			}
			return math.Pow(prod, 1/math.Max(n, 1))
		})
	}
	inside := pgMap(b, s, func(i, t int) float64 { return b01(judged[i][t] >= c.Low && judged[i][t] <= c.High) })
	w, keep := ones, mask
	switch c.Mode {
	case losscfg.CorrectionMIS:
		w = pgMap(b, s, func(i, t int) float64 { return ratio[i][t] * inside[i][t] })
		keep = pgMap(b, s, func(i, t int) float64 { return mask[i][t] * inside[i][t] })
	case losscfg.CorrectionIcePop:
		w = pgMap(b, s, func(i, t int) float64 { return ratio[i][t] * inside[i][t] })
	case losscfg.CorrectionGeoMask:
		keep = pgMap(b, s, func(i, t int) float64 { return mask[i][t] * inside[i][t] })
	}
	effective := pgMap(b, s, func(i, t int) float64 {
		if c.Mode == losscfg.CorrectionGeoMask {
			return inside[i][t]
		}
		return w[i][t]
	})
	seqMasked, rows := 0.0, 0.0
	for i := range mask {
		n, dropped := 0.0, false
		for t := range mask[i] {
			n += mask[i][t]
			dropped = dropped || (mask[i][t] > 0 && inside[i][t] == 0)
		}
		if n > 0 {
			rows++
			seqMasked += b01(dropped)
		}
	}
	return corrRef{w: w, keep: keep, m: map[string]float64{
		MetricCorrWeightMean:    tokMean(effective),
		MetricCorrMaskedFrac:    tokMean(pgMap(b, s, func(i, t int) float64 { return 1 - inside[i][t] })),
		MetricCorrLowFrac:       tokMean(pgMap(b, s, func(i, t int) float64 { return b01(judged[i][t] < c.Low) })),
		MetricCorrHighFrac:      tokMean(pgMap(b, s, func(i, t int) float64 { return b01(judged[i][t] > c.High) })),
		MetricCorrSeqMaskedFrac: seqMasked / math.Max(rows, 1),
	}}
}

func b01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// runCorrection evaluates OffPolicyCorrection on float32 inputs: w (ones when nil), keep, the
// gradient of Σ w·keep with respect to old and behaviour (must be 0: the weights are constants), and
// the metrics in sorted-key order.
func runCorrection(t *testing.T, old, beh, mask [][]float32, c losscfg.Correction) (w, keep, gOld, gBeh []float32, keys []string, metrics [][]float32) {
	t.Helper()
	out := pgExec(t, func(in []*Node) []*Node {
		w, keep, m := OffPolicyCorrection(in[0], in[1], in[2], c)
		if w == nil {
			w = OnesLike(in[0])
		}
		g := Gradient(ReduceAllSum(Mul(w, keep)), in[0], in[1])
		keys = pgSortedKeys(m)
		res := []*Node{w, keep, g[0], g[1]}
		for _, k := range keys {
			res = append(res, m[k])
		}
		return res
	}, old, beh, mask)
	return out[0], out[1], out[2], out[3], keys, out[4:]
}

// corrHand: old − behaviour log-ratios of 3, 1.5, 1, 0.25 (row 0), 1.2, 1.1 (row 1) and 0.55, 0.8
// (row 2); padding holds ratios of 100, 0.001 and 50 that must not leak into anything.
var (
	corrHandOld = [][]float32{{ln32(3), ln32(1.5), 0, ln32(0.25), ln32(100)}, {ln32(1.2), ln32(1.1), ln32(0.001), 0, 0},
		{ln32(0.55), ln32(0.8), ln32(50), 0, 0}}
	corrHandBeh  = [][]float32{{0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}}
	corrHandMask = [][]float32{{1, 1, 1, 1, 0}, {1, 1, 0, 0, 0}, {1, 1, 0, 0, 0}}
	corrHandAll  = [][]float64{{1, 1, 1, 1, 0}, {1, 1, 0, 0, 0}, {1, 1, 0, 0, 0}}
	corrHandNone = [][]float64{{0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}}
)

func ln32(x float64) float32 { return float32(math.Log(x)) }

// TestOffPolicyCorrectionHandComputed: every mode on corrHand, with the expected weights, keep masks
// and metrics worked out by hand (8 counted tokens, 3 rows). Row 0's geometric-mean ratio is
// (3·1.5·1·0.25)^(1/4) = 1.125^(1/4) ≈ 1.030, row 1's (1.2·1.1)^(1/2) ≈ 1.149, row 2's
// (0.55·0.8)^(1/2) ≈ 0.663.
func TestOffPolicyCorrectionHandComputed(t *testing.T) {
	cases := []struct {
		name    string
		c       losscfg.Correction
		w, keep [][]float64 // counted tokens only are compared for w
		metrics map[string]float64
	}{
		{name: "none", c: losscfg.Correction{Mode: losscfg.CorrectionNone}, w: [][]float64{{1, 1, 1, 1}, {1, 1}, {1, 1}},
			keep: corrHandAll, metrics: map[string]float64{}},
		{name: "tis C=2: 3 truncated to 2", c: losscfg.Correction{Mode: losscfg.CorrectionTIS},
			w: [][]float64{{2, 1.5, 1, 0.25}, {1.2, 1.1}, {0.55, 0.8}}, keep: corrHandAll,
			metrics: map[string]float64{"tis_truncated_frac": 1.0 / 8, "tis_weight_mean": 8.4 / 8}},
		{name: "mis [0.5,2]: 3 (high) and 0.25 (low) leave the loss", c: losscfg.Correction{Mode: losscfg.CorrectionMIS},
			w: [][]float64{{0, 1.5, 1, 0}, {1.2, 1.1}, {0.55, 0.8}}, keep: [][]float64{{0, 1, 1, 0, 0}, {1, 1, 0, 0, 0}, {1, 1, 0, 0, 0}},
			metrics: map[string]float64{MetricCorrWeightMean: 6.15 / 8, MetricCorrMaskedFrac: 2.0 / 8, MetricCorrLowFrac: 1.0 / 8,
				MetricCorrHighFrac: 1.0 / 8, MetricCorrSeqMaskedFrac: 1.0 / 3}},
		{name: "icepop [0.5,5]: 0.25 zero-weighted, kept in the mask", c: losscfg.Correction{Mode: losscfg.CorrectionIcePop},
			w: [][]float64{{3, 1.5, 1, 0}, {1.2, 1.1}, {0.55, 0.8}}, keep: corrHandAll,
			metrics: map[string]float64{MetricCorrWeightMean: 9.15 / 8, MetricCorrMaskedFrac: 1.0 / 8, MetricCorrLowFrac: 1.0 / 8,
				MetricCorrHighFrac: 0, MetricCorrSeqMaskedFrac: 1.0 / 3}},
		{name: "icepop [0.85,2.5]: both tails", c: losscfg.Correction{Mode: losscfg.CorrectionIcePop, Low: 0.85, High: 2.5},
			w: [][]float64{{0, 1.5, 1, 0}, {1.2, 1.1}, {0, 0}}, keep: corrHandAll,
			metrics: map[string]float64{MetricCorrWeightMean: 4.8 / 8, MetricCorrMaskedFrac: 4.0 / 8, MetricCorrLowFrac: 3.0 / 8,
				MetricCorrHighFrac: 1.0 / 8, MetricCorrSeqMaskedFrac: 2.0 / 3}},
		{name: "geo_mask [0.9,1.1]: row 1 high, row 2 low", c: losscfg.Correction{Mode: losscfg.CorrectionGeoMask, Low: 0.9, High: 1.1},
			w: [][]float64{{1, 1, 1, 1}, {1, 1}, {1, 1}}, keep: [][]float64{{1, 1, 1, 1, 0}, {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}},
			metrics: map[string]float64{MetricCorrWeightMean: 4.0 / 8, MetricCorrMaskedFrac: 4.0 / 8, MetricCorrLowFrac: 2.0 / 8,
				MetricCorrHighFrac: 2.0 / 8, MetricCorrSeqMaskedFrac: 2.0 / 3}},
		{name: "geo_mask [0.7,1.2]: row 2 low", c: losscfg.Correction{Mode: losscfg.CorrectionGeoMask, Low: 0.7, High: 1.2},
			w: [][]float64{{1, 1, 1, 1}, {1, 1}, {1, 1}}, keep: [][]float64{{1, 1, 1, 1, 0}, {1, 1, 0, 0, 0}, {0, 0, 0, 0, 0}},
			metrics: map[string]float64{MetricCorrWeightMean: 6.0 / 8, MetricCorrMaskedFrac: 2.0 / 8, MetricCorrLowFrac: 2.0 / 8,
				MetricCorrHighFrac: 0, MetricCorrSeqMaskedFrac: 1.0 / 3}},
		{name: "geo_mask default [0.999,1.001]: every row dropped", c: losscfg.Correction{Mode: losscfg.CorrectionGeoMask},
			w: [][]float64{{1, 1, 1, 1}, {1, 1}, {1, 1}}, keep: corrHandNone,
			metrics: map[string]float64{MetricCorrWeightMean: 0, MetricCorrMaskedFrac: 1, MetricCorrLowFrac: 2.0 / 8,
				MetricCorrHighFrac: 6.0 / 8, MetricCorrSeqMaskedFrac: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, keep, gOld, gBeh, keys, got := runCorrection(t, corrHandOld, corrHandBeh, corrHandMask, tc.c)
			for i, row := range tc.w {
				for j, want := range row {
					pgCheckScalar(t, fmt.Sprintf("w[%d][%d]", i, j), w[i*5+j], want)
				}
			}
			pgCheckMatrix(t, "keep", keep, tc.keep)
			pgCheckMatrix(t, "d(Σw·keep)/d old", gOld, corrHandNone)
			pgCheckMatrix(t, "d(Σw·keep)/d behaviour", gBeh, corrHandNone)
			pgCheckMetrics(t, tc.name, keys, got, tc.metrics)
			// The hand numbers are also the reference's.
			ref := refCorrection(pgF64(corrHandOld), pgF64(corrHandBeh), pgF64(corrHandMask), tc.c)
			for k, want := range tc.metrics {
				if math.Abs(ref.m[k]-want) > 1e-6 {
					t.Errorf("reference %s = %g, hand %g", k, ref.m[k], want)
				}
			}
			pgCheckMatrix(t, "reference keep", flat32(ref.keep), tc.keep)
		})
	}
}

func flat32(x [][]float64) []float32 {
	var out []float32
	for _, row := range x {
		for _, v := range row {
			out = append(out, float32(v))
		}
	}
	return out
}

// TestOffPolicyCorrectionMatchesReference: every mode and several bounds on the shared policy data
// (three rows of different lengths, padding with junk), Bool and float masks.
func TestOffPolicyCorrectionMatchesReference(t *testing.T) {
	old, beh, mask := pgF64(pgOld), pgF64(pgBeh), pgF64(pgMask)
	boolMask := make([][]bool, len(pgMask))
	for i, row := range pgMask {
		for _, v := range row {
			boolMask[i] = append(boolMask[i], v > 0)
		}
	}
	for _, c := range []losscfg.Correction{
		{Mode: losscfg.CorrectionNone}, {Mode: ""}, {Mode: losscfg.CorrectionTIS}, {Mode: losscfg.CorrectionTIS, High: 1.2},
		{Mode: losscfg.CorrectionMIS}, {Mode: losscfg.CorrectionMIS, Low: 0.8, High: 1.3}, {Mode: losscfg.CorrectionMIS, Low: 1, High: 1},
		{Mode: losscfg.CorrectionIcePop}, {Mode: losscfg.CorrectionIcePop, Low: 0.9, High: 1.15},
		{Mode: losscfg.CorrectionGeoMask}, {Mode: losscfg.CorrectionGeoMask, Low: 0.7, High: 1.05}, {Mode: losscfg.CorrectionGeoMask, Low: 0.5, High: 2},
	} {
		for _, m := range []any{pgMask, boolMask} {
			name := fmt.Sprintf("%s/%T", c, m)
			var keys []string
			out := pgExec(t, func(in []*Node) []*Node {
				w, keep, met := OffPolicyCorrection(in[0], in[1], in[2], c)
				if w == nil {
					w = OnesLike(in[0])
				}
				keys = pgSortedKeys(met)
				res := []*Node{w, keep}
				for _, k := range keys {
					res = append(res, met[k])
				}
				return res
			}, pgOld, pgBeh, m)
			ref := refCorrection(old, beh, mask, c)
			// w is only defined on counted tokens (padding is multiplied by a zero keep).
			wMasked := make([]float32, len(out[0]))
			for k := range out[0] {
				wMasked[k] = out[0][k] * float32(mask[k/4][k%4])
			}
			pgCheckMatrix(t, name+"/w", wMasked, pgMap(3, 4, func(i, t int) float64 { return ref.w[i][t] * mask[i][t] }))
			pgCheckMatrix(t, name+"/keep", out[1], ref.keep)
			pgCheckMetrics(t, name, keys, out[2:], ref.m)
		}
	}
}

// TestOffPolicyCorrectionOnPolicy: with π_old = π_behaviour (ratio 1) every mode keeps every token at
// weight 1 — Temper's sync mode, where rollout and trainer share the engine.
func TestOffPolicyCorrectionOnPolicy(t *testing.T) {
	for _, mode := range losscfg.CorrectionModes {
		w, keep, _, _, keys, got := runCorrection(t, pgOld, pgOld, pgMask, losscfg.Correction{Mode: mode})
		mask := pgF64(pgMask)
		for k := range w {
			if mask[k/4][k%4] > 0 && w[k] != 1 {
				t.Errorf("%s: w[%d] = %g, want 1", mode, k, w[k])
			}
		}
		pgCheckMatrix(t, mode+"/keep", keep, mask)
		for i, k := range keys {
			if strings.HasSuffix(k, "_frac") && got[i][0] != 0 {
				t.Errorf("%s: %s = %g, want 0", mode, k, got[i][0])
			}
		}
	}
}

func TestCorrectionConfig(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		want := map[string][2]float64{losscfg.CorrectionNone: {0, 0}, losscfg.CorrectionTIS: {0, 2}, losscfg.CorrectionMIS: {0.5, 2},
			losscfg.CorrectionGeoMask: {0.999, 1.001}, losscfg.CorrectionIcePop: {0.5, 5}}
		for _, mode := range losscfg.CorrectionModes {
			if l, h := losscfg.DefaultCorrectionBounds(mode); l != want[mode][0] || h != want[mode][1] {
				t.Errorf("%s: bounds [%g, %g], want %v", mode, l, h, want[mode])
			}
			if err := (losscfg.Correction{Mode: mode}).Validate(); err != nil {
				t.Errorf("%s with default bounds: %v", mode, err)
			}
		}
	})
	t.Run("string", func(t *testing.T) {
		for c, want := range map[losscfg.Correction]string{{}: "none", {Mode: "none"}: "none", {Mode: "tis"}: "tis[2]",
			{Mode: "tis", High: 3}: "tis[3]", {Mode: "mis"}: "mis[0.5,2]", {Mode: "icepop", Low: 0.2}: "icepop[0.2,5]",
			{Mode: "geo_mask"}: "geo_mask[0.999,1.001]"} {
			if got := c.String(); got != want {
				t.Errorf("%+v: %q, want %q", c, got, want)
			}
		}
	})
	t.Run("validate", func(t *testing.T) {
		cases := []struct {
			c     losscfg.Correction
			field string // named in the error as correction.FIELD=
			want  string
		}{
			{losscfg.Correction{Mode: "TIS"}, "mode", `"geo_mask"`},
			{losscfg.Correction{Mode: "rs"}, "mode", `"icepop"`},
			{losscfg.Correction{Mode: "none", High: 2}, "high", "takes no bounds"},
			{losscfg.Correction{Low: 0.5}, "low", "takes no bounds"},
			{losscfg.Correction{Mode: "tis", Low: 0.5}, "low", "mis or icepop"},
			{losscfg.Correction{Mode: "tis", High: 0.9}, "high", "C ≥ 1"},
			{losscfg.Correction{Mode: "mis", Low: 1.5}, "low", "0 < low ≤ 1"},
			{losscfg.Correction{Mode: "icepop", High: 0.9}, "high", "high ≥ 1"},
			{losscfg.Correction{Mode: "geo_mask", Low: -1}, "low", "≥ 0"},
			{losscfg.Correction{Mode: "mis", High: math.Inf(1)}, "high", "finite"},
			{losscfg.Correction{Mode: "mis", Low: math.NaN()}, "low", "finite"},
		}
		for _, tc := range cases {
			err := tc.c.Validate()
			if err == nil || !strings.Contains(err.Error(), "correction."+tc.field+"=") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%+v: error %v, want it to name correction.%s= and say %q", tc.c, err, tc.field, tc.want)
			}
		}
	})
	t.Run("tis_threshold alias", func(t *testing.T) {
		cfg := losscfg.DefaultPolicyConfig(losscfg.AlgoGRPO)
		if got := cfg.EffectiveCorrection(); got.Mode != losscfg.CorrectionNone || cfg.CorrectionSet() {
			t.Errorf("default: %+v set=%v, want none, unset", got, cfg.CorrectionSet())
		}
		cfg.TISThreshold = 3
		if got := cfg.EffectiveCorrection(); got != (losscfg.Correction{Mode: losscfg.CorrectionTIS, High: 3}) || !cfg.CorrectionSet() {
			t.Errorf("tis_threshold 3: %+v, want tis[3]", got)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("tis_threshold alone: %v", err)
		}
		cfg.Correction.Mode = losscfg.CorrectionMIS
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "tis_threshold=3") || !strings.Contains(err.Error(), "not both") {
			t.Errorf("tis_threshold with correction.mode: %v", err)
		}
		cfg.TISThreshold = 0
		cfg.Correction = losscfg.Correction{Mode: losscfg.CorrectionNone}
		if got := cfg.EffectiveCorrection(); got.Mode != losscfg.CorrectionNone || !cfg.CorrectionSet() {
			t.Errorf("explicit none: %+v set=%v", got, cfg.CorrectionSet())
		}
		cfg.Correction = losscfg.Correction{Mode: losscfg.CorrectionIcePop, High: 9}
		if err := cfg.Validate(); err != nil || cfg.EffectiveCorrection() != (losscfg.Correction{Mode: losscfg.CorrectionIcePop, Low: 0.5, High: 9}) {
			t.Errorf("icepop high 9: %v, %+v", err, cfg.EffectiveCorrection())
		}
		cfg.Correction = losscfg.Correction{Mode: "clip"}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "correction.mode=") {
			t.Errorf("policy config does not validate its correction: %v", err)
		}
	})
}
