package advantage

import (
	"math"
	"strings"
	"testing"
)

func close64(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func checkGroups(t *testing.T, name string, got, want [][]float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d groups, want %d", name, len(got), len(want))
	}
	for g := range want {
		if len(got[g]) != len(want[g]) {
			t.Fatalf("%s: group %d has %d entries, want %d", name, g, len(got[g]), len(want[g]))
		}
		for i := range want[g] {
			if !close64(got[g][i], want[g][i]) {
				t.Errorf("%s[%d][%d] = %.12g, want %.12g", name, g, i, got[g][i], want[g][i])
			}
		}
	}
}

// Plain references, written from the formulas (no shared helpers with the code under test).
func refGRPO(r []float64, eps float64, sample bool) []float64 {
	mu := 0.0
	for _, x := range r {
		mu += x / float64(len(r))
	}
	v := 0.0
	for _, x := range r {
		v += math.Pow(x-mu, 2)
	}
	d := float64(len(r))
	if sample {
		d--
	}
	std := 0.0
	if d > 0 {
		std = math.Sqrt(v / d)
	}
	out := []float64{}
	for _, x := range r {
		out = append(out, (x-mu)/(std+eps))
	}
	return out
}

func refRLOO(r []float64) []float64 {
	out := []float64{}
	for i := range r {
		others := 0.0
		for j := range r {
			if j != i {
				others += r[j]
			}
		}
		out = append(out, r[i]-others/float64(len(r)-1))
	}
	return out
}

func TestGRPOHandComputed(t *testing.T) {
	groups := [][]float64{{1, 0, 0, 1}, {1, 1, 1}, {2}, {0, 3}}
	// [1,0,0,1]: mean ½; population std ½ → ±1; sample std √(1/3) → ±½·√3 = ±0.8660.
	// [1,1,1]: all equal → 0. [2]: alone → 0. [0,3]: population std 1.5 → ∓1; sample std 3/√2 → ∓1/√2.
	eps := 1e-6
	pop := [][]float64{{0.5 / (0.5 + eps), -0.5 / (0.5 + eps), -0.5 / (0.5 + eps), 0.5 / (0.5 + eps)}, {0, 0, 0}, {0}, {-1.5 / (1.5 + eps), 1.5 / (1.5 + eps)}}
	s3 := math.Sqrt(1.0 / 3)
	s2 := 3 / math.Sqrt2
	sample := [][]float64{{0.5 / (s3 + eps), -0.5 / (s3 + eps), -0.5 / (s3 + eps), 0.5 / (s3 + eps)}, {0, 0, 0}, {0}, {-1.5 / (s2 + eps), 1.5 / (s2 + eps)}}
	got, err := GRPO(groups, GRPOConfig{Eps: eps, Std: StdPopulation})
	if err != nil {
		t.Fatal(err)
	}
	checkGroups(t, "grpo population", got, pop)
	got, err = GRPO(groups, DefaultGRPOConfig())
	if err != nil {
		t.Fatal(err)
	}
	checkGroups(t, "grpo sample (default)", got, sample)
	if math.Abs(got[0][0]-0.8660254) > 1e-5 {
		t.Errorf("grpo sample [1,0,0,1][0] = %g, want ≈ 0.8660", got[0][0])
	}
}

func TestGroupEstimatorsMatchReference(t *testing.T) {
	groups := [][]float64{{1, 0, 0, 1}, {0.3, -1.2, 2.5, 0.7, 0.7, 1.9, -0.4, 0}, {5, 5}, {0, 1, 0, 0, 0, 0, 0, 0}, {-2.5, 4, 1e3}}
	for _, cfg := range []GRPOConfig{DefaultGRPOConfig(), {Eps: 1e-4, Std: StdPopulation}} {
		got, err := GRPO(groups, cfg)
		if err != nil {
			t.Fatal(err)
		}
		want := [][]float64{}
		for _, g := range groups {
			want = append(want, refGRPO(g, cfg.Eps, cfg.Std == StdSample))
		}
		checkGroups(t, "grpo "+cfg.Std, got, want)
	}
	dr, err := DrGRPO(groups)
	if err != nil {
		t.Fatal(err)
	}
	rl, err := RLOO(groups)
	if err != nil {
		t.Fatal(err)
	}
	wantDr, wantRL := [][]float64{}, [][]float64{}
	for _, g := range groups {
		mu := 0.0
		for _, x := range g {
			mu += x / float64(len(g))
		}
		row := []float64{}
		for _, x := range g {
			row = append(row, x-mu)
		}
		wantDr = append(wantDr, row)
		wantRL = append(wantRL, refRLOO(g))
	}
	checkGroups(t, "dr_grpo", dr, wantDr)
	checkGroups(t, "rloo", rl, wantRL)
	// RLOO is Dr. GRPO scaled by G/(G−1).
	for g := range groups {
		k := float64(len(groups[g]))
		for i := range groups[g] {
			if !close64(rl[g][i], dr[g][i]*k/(k-1)) {
				t.Errorf("rloo[%d][%d] = %g, want G/(G−1)·dr = %g", g, i, rl[g][i], dr[g][i]*k/(k-1))
			}
		}
	}
}

func TestDrGRPOAndRLOOHandComputed(t *testing.T) {
	dr, err := DrGRPO([][]float64{{1, 0, 0, 1}, {3}})
	if err != nil {
		t.Fatal(err)
	}
	checkGroups(t, "dr_grpo", dr, [][]float64{{0.5, -0.5, -0.5, 0.5}, {0}})
	// RLOO on [1,0,0,1]: 1 − (0+0+1)/3 = ⅔ and 0 − (1+0+1)/3 = −⅔.
	rl, err := RLOO([][]float64{{1, 0, 0, 1}, {2, 4}})
	if err != nil {
		t.Fatal(err)
	}
	checkGroups(t, "rloo", rl, [][]float64{{2.0 / 3, -2.0 / 3, -2.0 / 3, 2.0 / 3}, {-2, 2}})
}

func TestGroupErrors(t *testing.T) {
	cases := []struct {
		name string
		fn   func() error
		want string
	}{
		{"rloo singleton", func() error { _, err := RLOO([][]float64{{1, 0}, {1}}); return err }, "group 1 has 1 samples"},
		{"grpo empty", func() error { _, err := GRPO([][]float64{{}}, DefaultGRPOConfig()); return err }, "group 0 has 0"},
		{"dr nan", func() error { _, err := DrGRPO([][]float64{{1, math.NaN()}}); return err }, "group 0 sample 1"},
		{"grpo inf", func() error { _, err := GRPO([][]float64{{0}, {math.Inf(1), 0}}, DefaultGRPOConfig()); return err }, "group 1 sample 0"},
		{"grpo eps", func() error { _, err := GRPO(nil, GRPOConfig{Eps: 0, Std: StdSample}); return err }, "eps="},
		{"grpo std", func() error { _, err := GRPO(nil, GRPOConfig{Eps: 1e-6, Std: "unbiased"}); return err }, "std="},
		{"split", func() error { _, err := Split([]float64{1, 2, 3}, 2); return err }, "groups of 2"},
	}
	for _, c := range cases {
		if err := c.fn(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}

func TestFlattenSplit(t *testing.T) {
	g, err := Split([]float64{1, 2, 3, 4, 5, 6}, 3)
	if err != nil {
		t.Fatal(err)
	}
	checkGroups(t, "split", g, [][]float64{{1, 2, 3}, {4, 5, 6}})
	g[0] = append(g[0], 99) // capped: must not overwrite group 1
	if f := Flatten(g); len(f) != 7 || f[3] != 99 || f[4] != 4 {
		t.Errorf("flatten %v", f)
	}
}
