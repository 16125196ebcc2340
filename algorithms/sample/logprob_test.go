package sample

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// logProbReference is LogProb as it was before the vector path, kept verbatim: the definition every
// LogProb result must reproduce bit for bit (generations record it, golden tests hash it).
func logProbReference(logits []float32, tok int) float64 {
	mx := math.Inf(-1)
	for _, l := range logits {
		mx = math.Max(mx, float64(l))
	}
	var z float64
	for _, l := range logits {
		z += math.Exp(float64(l) - mx)
	}
	return float64(logits[tok]) - mx - math.Log(z)
}

// callLogProb returns f(logits, tok), or panicked where it panics (an empty row, a tok out of range).
func callLogProb(f func([]float32, int) float64, logits []float32, tok int) (lp float64, panicked bool) {
	defer func() {
		if recover() != nil {
			panicked = true
		}
	}()
	return f(logits, tok), false
}

// checkLogProbBits fails unless LogProb and logProbReference agree on (logits, tok) to the bit, or
// both panic.
func checkLogProbBits(t *testing.T, name string, logits []float32, tok int) {
	t.Helper()
	got, gotPanic := callLogProb(LogProb, logits, tok)
	want, wantPanic := callLogProb(logProbReference, logits, tok)
	if gotPanic != wantPanic || math.Float64bits(got) != math.Float64bits(want) {
		t.Errorf("%s (len %d, tok %d): LogProb = %v (%#016x, panic %v), reference %v (%#016x, panic %v)",
			name, len(logits), tok, got, math.Float64bits(got), gotPanic, want, math.Float64bits(want), wantPanic)
	}
}

// checkLogProbToks checks tok at every position of short rows, and at the first, last, largest and
// a few random positions of long ones.
func checkLogProbToks(t *testing.T, name string, logits []float32, rng *rand.Rand) {
	t.Helper()
	if len(logits) <= 32 {
		for tok := range logits {
			checkLogProbBits(t, name, logits, tok)
		}
		return
	}
	toks := []int{0, len(logits) - 1, Greedy(logits)}
	for range 4 {
		toks = append(toks, rng.IntN(len(logits)))
	}
	for _, tok := range toks {
		checkLogProbBits(t, name, logits, tok)
	}
}

var logProbLengths = []int{1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 255, 256, 257, 263, 264, 1000, 32000, 151936}

// logitDists draw the logits of a random row: typical model scales, and spreads whose differences
// from the max reach archExp's special paths (arguments below -708.4 give denormal results, below
// -745.1 zero) and its boundaries.
var logitDists = []struct {
	name string
	draw func(rng *rand.Rand) float32
}{
	{"normal σ=3", func(rng *rand.Rand) float32 { return float32(3 * rng.NormFloat64()) }},
	{"normal σ=30 +1e4", func(rng *rand.Rand) float32 { return float32(1e4 + 30*rng.NormFloat64()) }},
	{"uniform [-800, 0]", func(rng *rand.Rand) float32 { return float32(-800 * rng.Float64()) }},
	{"uniform [-712, -704] and 0", func(rng *rand.Rand) float32 {
		if rng.IntN(8) == 0 {
			return 0
		}
		return float32(-712 + 8*rng.Float64())
	}},
	{"uniform [-750, -740] and 0", func(rng *rand.Rand) float32 {
		if rng.IntN(8) == 0 {
			return 0
		}
		return float32(-750 + 10*rng.Float64())
	}},
	{"uniform ±1e38", func(rng *rand.Rand) float32 { return float32(2e38 * (rng.Float64() - 0.5)) }},
	{"tiny and zeros", func(rng *rand.Rand) float32 {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return float32(math.Copysign(0, -1))
		}
		return float32(1e-40 * rng.NormFloat64())
	}},
	{"normal with -Inf", func(rng *rand.Rand) float32 {
		if rng.IntN(5) == 0 {
			return float32(math.Inf(-1))
		}
		return float32(3 * rng.NormFloat64())
	}},
	{"normal with NaN", func(rng *rand.Rand) float32 {
		if rng.IntN(200) == 0 {
			return float32(math.NaN())
		}
		return float32(3 * rng.NormFloat64())
	}},
	{"normal with +Inf", func(rng *rand.Rand) float32 {
		if rng.IntN(200) == 0 {
			return float32(math.Inf(1))
		}
		return float32(3 * rng.NormFloat64())
	}},
}

// TestLogProbBitsRandom: LogProb returns logProbReference's bits on random rows of every length and
// distribution, on each vector width the machine has (and with the vector path off).
func TestLogProbBitsRandom(t *testing.T) {
	forEachExpWidth(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		for _, d := range logitDists {
			for _, n := range logProbLengths {
				if n > 1000 && testing.Short() {
					continue
				}
				logits := make([]float32, n)
				for i := range logits {
					logits[i] = d.draw(rng)
				}
				checkLogProbToks(t, fmt.Sprintf("%s/n=%d", d.name, n), logits, rng)
			}
		}
	})
}

// TestLogProbBitsSpecial: LogProb returns logProbReference's bits (or panics as it does) on the rows
// whose max or exponentials are special cases.
func TestLogProbBitsSpecial(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	negz := float32(math.Copysign(0, -1))
	maxf := float32(math.MaxFloat32)
	tiny := math.Float32frombits(1) // the smallest float32 denormal
	cases := []struct {
		name   string
		logits []float32
	}{
		{"empty", nil},
		{"one", []float32{1.5}},
		{"all equal", []float32{2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}},
		{"all equal huge", []float32{maxf, maxf, maxf, maxf, maxf, maxf, maxf, maxf, maxf}},
		{"+0", []float32{0}},
		{"-0", []float32{negz}},
		{"-0 +0", []float32{negz, 0}},
		{"+0 -0", []float32{0, negz}},
		{"-0 -0 -1", []float32{negz, negz, -1}},
		{"-1 -0 -0 +0 -0", []float32{-1, negz, negz, 0, negz, -2, -3, -4, -5}},
		{"-0 ×9 and negatives", []float32{-1, negz, -2, negz, -3, negz, -4, negz, -5, negz}},
		{"tiny ±", []float32{tiny, -tiny, 0, negz, tiny, -tiny, 0, negz, tiny}},
		{"-tiny and -0", []float32{-tiny, negz, -tiny, negz, -tiny, negz, -tiny, negz, -tiny}},
		{"±max", []float32{maxf, -maxf, 0, 1, -1, maxf, -maxf, 3, 4}},
		{"-max only", []float32{-maxf, -maxf, -maxf, -maxf, -maxf, -maxf, -maxf, -maxf, -maxf}},
		{"+Inf", []float32{1, inf, 2, 3, 4, 5, 6, 7, 8}},
		{"two +Inf", []float32{inf, 1, 2, 3, 4, 5, 6, 7, inf}},
		{"-Inf", []float32{1, -inf, 2, 3, 4, 5, 6, 7, 8}},
		{"all -Inf", []float32{-inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf}},
		{"one finite among -Inf", []float32{-inf, -inf, -inf, -inf, 7, -inf, -inf, -inf, -inf}},
		{"±Inf", []float32{-inf, inf, -inf, inf, 0, -inf, inf, -inf, inf}},
		{"NaN", []float32{1, nan, 2, 3, 4, 5, 6, 7, 8}},
		{"NaN first", []float32{nan, 1, 2, 3, 4, 5, 6, 7, 8}},
		{"NaN last", []float32{1, 2, 3, 4, 5, 6, 7, 8, nan}},
		{"NaN and +Inf", []float32{1, nan, inf, 3, 4, 5, 6, 7, 8}},
		{"+Inf and NaN", []float32{inf, 1, 2, 3, 4, 5, 6, 7, nan}},
		{"NaN and -Inf", []float32{-inf, nan, 2, 3, 4, 5, 6, 7, 8}},
		{"negative NaN", []float32{1, 2, math.Float32frombits(0xFFC00001), 3, 4, 5, 6, 7, 8}},
		{"all NaN", []float32{nan, nan, nan, nan, nan, nan, nan, nan, nan}},
		// Differences from the max (0) on archExp's boundaries: the last normal result (-708.39),
		// the vector path's edge (-708.5), denormal results, the last nonzero one (-745.13), zeros.
		{"denormal boundary", []float32{0, -708, -708.25, -708.375, -708.39, -708.40, -708.5, -708.5001, -708.75, -709, -709.5, -710, -720, -740, -745, -745.1, -745.13, -745.14, -745.5, -746, -746.1, -800, -1e4, -1e30}},
		{"max 1e4", []float32{1e4, 1e4 - 708.4, 1e4 - 708.5, 1e4 - 745, 1e4 - 746, 9999, 1, -1e4, 1e4 - 0.0009765625}},
	}
	forEachExpWidth(t, func(t *testing.T) {
		for _, c := range cases {
			for tok := range len(c.logits) + 1 { // the last is out of range: both panic
				checkLogProbBits(t, c.name, c.logits, tok)
			}
			checkLogProbBits(t, c.name, c.logits, -1)
			// The row repeated 5 times, alone and after 3 more logits (so that its values meet
			// other lanes of the vector max and exp): the same special cases in whole vectors.
			for _, prefix := range [][]float32{nil, {-3, -2, -1}} {
				tiled := slices.Clone(prefix)
				for range 5 {
					tiled = append(tiled, c.logits...)
				}
				for tok := range tiled {
					checkLogProbBits(t, fmt.Sprintf("%s ×5 after %v", c.name, prefix), tiled, tok)
				}
			}
		}
		// Every float32 step over the boundaries, in rows long enough for whole vectors.
		rng := rand.New(rand.NewPCG(3, 4))
		for _, edge := range []float32{-708.5, -708.39641, -745.1332, -745.5, -746} {
			row := []float32{0}
			for x := edge - 64*ulp32(edge); len(row) < 257; x = math.Nextafter32(x, 0) {
				row = append(row, x)
			}
			checkLogProbToks(t, fmt.Sprintf("steps around %v", edge), row, rng)
		}
	})
}

func ulp32(x float32) float32 { return math.Nextafter32(x, float32(math.Inf(1))) - x }

// BenchmarkLogProb: the vector path against the reference, on a small vocabulary (the generation
// tests' 264) and a large one, with logits at a model's scale.
func BenchmarkLogProb(b *testing.B) {
	for _, n := range []int{264, 32000} {
		rng := rand.New(rand.NewPCG(5, 6))
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = float32(3 * rng.NormFloat64())
		}
		for _, impl := range []struct {
			name string
			f    func([]float32, int) float64
		}{{"old", logProbReference}, {"new", LogProb}} {
			b.Run(fmt.Sprintf("n=%d/%s", n, impl.name), func(b *testing.B) {
				var s float64
				for i := 0; b.Loop(); i++ {
					s += impl.f(logits, i%n)
				}
				if math.IsNaN(s) {
					b.Fatal("NaN")
				}
			})
		}
	}
}
