//go:build goexperiment.simd && amd64

package sample

import (
	"fmt"
	"math"
	"math/rand/v2"
	"simd/archsimd"
	"testing"
)

// machineExpWidths are the vector widths this CPU runs: 8 with AVX-512, 4 with AVX2 (an AVX-512
// machine runs both), none without FMA (pickExpWidth).
func machineExpWidths() []int {
	if !archsimd.X86.AVX() || !archsimd.X86.FMA() {
		return nil
	}
	var w []int
	if archsimd.X86.AVX512() {
		w = append(w, 8)
	}
	if archsimd.X86.AVX2() {
		w = append(w, 4)
	}
	return w
}

// forEachExpWidth runs f with expWidth set to each width the machine runs, then 0 (the scalar
// path), and restores it. Tests in this package do not run in parallel, so the switch is safe.
func forEachExpWidth(t *testing.T, f func(t *testing.T)) {
	saved := expWidth
	defer func() { expWidth = saved }()
	for _, w := range append(machineExpWidths(), 0) {
		expWidth = w
		t.Run(fmt.Sprintf("width=%d", w), f)
	}
}

// TestExpVectorOn: on a CPU with AVX and FMA the vector path is on after init, so the probe check
// accepted it (a toolchain whose math.Exp changed turns it off and fails here), and the bit tests
// above run it rather than only the scalar path.
func TestExpVectorOn(t *testing.T) {
	if w := machineExpWidths(); len(w) > 0 && expWidth != w[0] {
		t.Fatalf("expWidth = %d, want %d: init's probes found expVector != math.Exp", expWidth, w[0])
	}
	if len(machineExpWidths()) == 0 {
		t.Skip("no AVX+FMA: no vector path to check")
	}
}

// expTestInputs are TestExpVectorBits's arguments: dense random points and an even sweep over
// [-750, 1] (the range LogProb's arguments live in, down past archExp's underflow), every float64
// step around the boundaries of its branches and of expVector's range check, random points up to
// past overflow, and the special values, scattered so that each lands in every lane.
func expTestInputs(short bool) []float64 {
	const lo, hi = -750.0, 1.0
	nRandom, nSweep, nSteps := 4_000_000, 4_000_000, 4096
	if short {
		nRandom, nSweep, nSteps = 200_000, 200_000, 256
	}
	rng := rand.New(rand.NewPCG(7, 8))
	var in []float64
	for range nRandom {
		in = append(in, lo+(hi-lo)*rng.Float64())
	}
	for i := range nSweep {
		in = append(in, lo+(hi-lo)*float64(i)/float64(nSweep-1))
	}
	edges := []float64{expLowest, expHighest, expZeroAt, -708.3964185322641, -745.1332191019411, -745.1332191019412,
		-744.4400719213812, -709.0895657128241, -708.7468922, 709.4398629, 709.782712893384, 709.7827128933841, 0, -1e-300}
	for _, e := range edges {
		x := e
		for range nSteps {
			x = math.Nextafter(x, math.Inf(-1))
		}
		for range 2 * nSteps {
			in = append(in, x)
			x = math.Nextafter(x, math.Inf(1))
		}
	}
	for range nRandom / 20 {
		in = append(in, 720*rng.Float64())
	}
	specials := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(),
		math.Float64frombits(0xFFF8000000000000), math.Float64frombits(0x7FF0000000000001),
		math.Float64frombits(0xFFF0000000000001), math.MaxFloat64, -math.MaxFloat64,
		math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64, 1e-310, -1e-310, 1e300, -1e300,
		-1e10, 1e10, -1488522236, -1488522237, -1488522235.9, 1000, -1000, 710, -710, -2e9}
	for range 64 {
		for _, s := range specials {
			in = append(in, s)
			for range rng.IntN(9) {
				in = append(in, lo+(hi-lo)*rng.Float64())
			}
		}
	}
	return in
}

// TestExpVectorBits: expVector returns math.Exp's bits on every argument of expTestInputs, at each
// vector width, into a separate slice and in place, over chunks of odd length so the tails are
// exercised as well.
func TestExpVectorBits(t *testing.T) {
	widths := machineExpWidths()
	if len(widths) == 0 {
		t.Skip("no AVX+FMA: no vector path to check")
	}
	in := expTestInputs(testing.Short())
	want := make([]float64, len(in))
	for i, x := range in {
		want[i] = math.Exp(x)
	}
	saved := expWidth
	defer func() { expWidth = saved }()
	for _, w := range widths {
		expWidth = w
		t.Run(fmt.Sprintf("width=%d", w), func(t *testing.T) {
			got := make([]float64, len(in))
			inPlace := make([]float64, len(in))
			copy(inPlace, in)
			const chunk = 4093
			for i := 0; i < len(in); i += chunk {
				j := min(i+chunk, len(in))
				expVector(got[i:j], in[i:j])
				expVector(inPlace[i:j], inPlace[i:j])
			}
			bad := 0
			for i, x := range in {
				w := math.Float64bits(want[i])
				if g, p := math.Float64bits(got[i]), math.Float64bits(inPlace[i]); g != w || p != w {
					if bad++; bad <= 10 {
						t.Errorf("exp(%v) (%#016x): got %#016x, in place %#016x, math.Exp %#016x", x, math.Float64bits(x), g, p, w)
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d arguments differ", bad, len(in))
			}
		})
	}
}

// archExpFused and archExpUnfused transcribe the two branches of math/exp_amd64.s in scalar Go, for
// arguments in [expLowest, expHighest] (no special path). The explicit float64 conversions keep the
// compiler from fusing the unfused branch's multiply-adds.
func archExpFused(x float64) float64 {
	k := math.RoundToEven(x * expLog2E)
	r := math.FMA(-k, expLn2U, x)
	r = math.FMA(-k, expLn2L, r)
	r *= 0.0625
	p := expP6
	for _, c := range []float64{expP5, expP4, expP3, expP2, expP1, 0.5, 1} {
		p = math.FMA(p, r, c)
	}
	r *= p
	for range 3 {
		r *= r + 2
	}
	r = math.FMA(r+2, r, 1)
	return r * math.Ldexp(1, int(k))
}

func archExpUnfused(x float64) float64 {
	k := math.RoundToEven(x * expLog2E)
	r := x - float64(expLn2U*k)
	r -= float64(expLn2L * k)
	r *= 0.0625
	p := expP6
	for _, c := range []float64{expP5, expP4, expP3, expP2, expP1, 0.5, 1} {
		p = float64(p*r) + c
	}
	r *= p
	for range 4 {
		r *= r + 2
	}
	return (r + 1) * math.Ldexp(1, int(k))
}

// TestExpProbesTellTheBranches: on this CPU math.Exp is archExp's fused branch (the one expVector
// repeats) on random arguments, and expProbes, init's check, includes arguments where the unfused
// branch rounds differently, so a math.Exp that took it would be caught there.
func TestExpProbesTellTheBranches(t *testing.T) {
	if len(machineExpWidths()) == 0 {
		t.Skip("no AVX+FMA: math.Exp takes the unfused branch")
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for range 100_000 {
		x := expLowest + (expHighest-expLowest)*rng.Float64()
		if g, w := math.Float64bits(archExpFused(x)), math.Float64bits(math.Exp(x)); g != w {
			t.Fatalf("exp(%v): fused branch %#016x, math.Exp %#016x", x, g, w)
		}
	}
	if len(expProbes)%8 != 0 {
		t.Errorf("%d probes: not whole vectors of 8, so some skip the vector lanes", len(expProbes))
	}
	differ := 0
	for _, x := range expProbes {
		if x < expLowest || x > expHighest {
			t.Fatalf("probe %v outside [%v, %v]", x, expLowest, expHighest)
		}
		if archExpFused(x) != archExpUnfused(x) {
			differ++
		}
	}
	if differ < 16 {
		t.Errorf("only %d of %d probes tell the fused branch from the unfused one", differ, len(expProbes))
	}
}

// TestMaxLogit: where maxLogit accepts a row, it returns the bits of logProbScalar's math.Max fold
// (the ±0 rule included, which LogProb's result alone cannot show: the sign of a zero max changes
// no log-prob); where it refuses, the fold is not finite. Rows of every length up to 70 built from
// values that meet the fold's special cases, at each width.
func TestMaxLogit(t *testing.T) {
	negz, inf, nan := float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.NaN())
	values := []float32{0, negz, -1, -5, 2, -inf, inf, nan, math.Float32frombits(1), -math.MaxFloat32}
	forEachExpWidth(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(11, 12))
		for n := range 71 {
			for range 200 {
				row := make([]float32, n)
				for i := range row {
					// Mostly the first four (zeros and negatives), so that zero maxima are common.
					if rng.IntN(4) == 0 {
						row[i] = values[rng.IntN(len(values))]
					} else {
						row[i] = values[rng.IntN(4)]
					}
				}
				fold := math.Inf(-1)
				for _, l := range row {
					fold = math.Max(fold, float64(l))
				}
				m, ok := maxLogit(row)
				finite := !math.IsInf(fold, 0) && !math.IsNaN(fold)
				if ok != finite || ok && math.Float64bits(m) != math.Float64bits(fold) {
					t.Fatalf("maxLogit(%v) = %v (%#x), %v; math.Max fold %v (%#x)", row, m, math.Float64bits(m), ok, fold, math.Float64bits(fold))
				}
			}
		}
	})
}
