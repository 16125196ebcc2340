//go:build goexperiment.simd && amd64

package sample

import (
	"math"
	"simd/archsimd"
)

// LogProb's vector path. logProbScalar spends nearly all its time in math.Exp, one call per logit;
// on amd64 that is the assembly archExp of math/exp_amd64.s, a straight-line polynomial with no
// table, so the same float64 operations run in vector lanes give the same bits. expVector repeats
// them for the arguments whose scalar path is that straight line, gives +0 where archExp returns
// its underflow 0, and calls math.Exp itself for every other lane; z is still summed one term at a
// time in index order, so its rounding is unchanged.

// expWidth is expVector's vector width: 8 (AVX-512), 4 (AVX2) or 0 (no vector path: LogProb is
// logProbScalar). It is 0 unless the CPU has AVX and FMA, the condition (math.useFMA) under which
// archExp takes its fused branch, the one expVector repeats; a machine without FMA would run the
// unfused branch, which this file does not reproduce. Tests set it to check each width.
var expWidth = pickExpWidth()

func pickExpWidth() int {
	switch {
	case !archsimd.X86.AVX() || !archsimd.X86.FMA():
		return 0
	case archsimd.X86.AVX512():
		return 8
	case archsimd.X86.AVX2():
		return 4
	}
	return 0
}

func init() {
	// A guard against a toolchain whose math.Exp is no longer the one transcribed here: the
	// vector path is used only if it reproduces math.Exp on these probes (they include arguments
	// where archExp's fused and unfused branches round differently). The tests check far more.
	if expWidth != 0 && !expVectorAgrees() {
		expWidth = 0
	}
}

// archExp's constants (math/exp_amd64.s), spelled as there.
const (
	expLog2E = 1.4426950408889634073599246810018920
	expLn2U  = 0.69314718055966295651160180568695068359375
	expLn2L  = 0.28235290563031577122588448175013436025525412068e-12
	expP1    = 1.6666666666666666667e-1
	expP2    = 4.1666666666666666667e-2
	expP3    = 8.3333333333333333333e-3
	expP4    = 1.3888888888888888889e-3
	expP5    = 1.9841269841269841270e-4
	expP6    = 2.4801587301587301587e-5
)

const (
	// expRound is 1.5·2^52: y + expRound rounds y (|y| < 2^51) to an integer k, ties to even, as
	// archExp's CVTSD2SL does under Go's default rounding mode, and leaves k + the bits of
	// expRound in the sum's bits, from which 2^k is built.
	expRound = 0x1.8p52
	// [expLowest, expHighest]: the arguments for which archExp's k = round(x·log2 e) lies in
	// [-1022, 1023], so that it returns fr·2^k through its lastStep without the denormal or
	// overflow branches (x = -708.5 gives k = -1022; x = 709, k = 1023). NaN and ±Inf fall outside.
	expLowest  = -708.5
	expHighest = 709
	// expZeroAt: every argument ≤ it (-Inf included) has k ≤ -1076 (or overflows int32), which
	// archExp returns as its underflow +0.
	expZeroAt = -746
)

// expProbes are expVectorAgrees's arguments: ones (found with the test's scalar transcriptions of
// the two branches) where archExp's fused and unfused branches give different bits
// (TestExpProbesTellTheBranches), over the range LogProb's arguments live in, then ordinary ones;
// 24 of them, so that every probe goes through vector lanes at either width (none in the scalar
// tail, which would compare math.Exp with itself).
var expProbes = [...]float64{
	-39.342098236083984, -36.564300537109375, -33.56719970703125, -31.66659927368164,
	-28.157800674438477, -25.964799880981445, -23.333200454711914, -21.798099517822266,
	-702.3432006835938, -677.5947265625, -638.7042236328125, -605.4705200195312,
	-575.065185546875, -546.0740966796875, -515.6688232421875, -454.1510925292969,
	0, -0.5, -1, -2.5, -7.25, -100, -350, -708.25,
}

// expVectorAgrees reports whether expVector reproduces math.Exp on expProbes.
func expVectorAgrees() bool {
	var out [len(expProbes)]float64
	expVector(out[:], expProbes[:])
	for i, x := range expProbes {
		if math.Float64bits(out[i]) != math.Float64bits(math.Exp(x)) {
			return false
		}
	}
	return true
}

// logProbBlock is how many terms of z one pass computes into a stack buffer before they are
// added; the buffer stays in L1 and off the heap.
const logProbBlock = 256

// logProbVector is LogProb with the exponentials in vector lanes, or false where it leaves the
// input to logProbScalar: no vector path, or a max that is not finite (a NaN or +Inf logit, or all
// -Inf), whose arithmetic is all special cases.
func logProbVector(logits []float32, tok int) (float64, bool) {
	if expWidth == 0 {
		return 0, false
	}
	mx, ok := maxLogit(logits)
	if !ok {
		return 0, false
	}
	var buf [logProbBlock]float64
	var z float64
	for rest := logits; len(rest) > 0; {
		n := min(len(rest), logProbBlock)
		b := buf[:n]
		shiftVector(b, rest[:n], mx)
		expVector(b, b)
		for _, e := range b {
			z += e
		}
		rest = rest[n:]
	}
	return float64(logits[tok]) - mx - math.Log(z), true
}

// maxLogit returns what logProbScalar's fold math.Max(…math.Max(-Inf, l0)…, ln) gives, where that is
// finite; false where it is not: a NaN or +Inf logit (the fold's special cases), no logits, or all
// of them -Inf. Without NaN and +Inf the fold is the largest value, except that among zeros it is
// +0 as soon as one +0 is folded in (math.Max(-0, +0) = +0), -0 only if every zero is -0; the
// largest value does not depend on the order it is found in, so lanes may find it. The float32
// comparisons order exactly as the float64 ones would: float32 → float64 is exact.
func maxLogit(logits []float32) (float64, bool) {
	m, i, ok := maxVector(logits)
	if !ok {
		return 0, false
	}
	for _, l := range logits[i:] {
		if l > m {
			m = l
		} else if l != l {
			return 0, false
		}
	}
	switch {
	case math.IsInf(float64(m), 0):
		return 0, false
	case m == 0:
		for _, l := range logits {
			if l == 0 && !math.Signbit(float64(l)) {
				return 0, true
			}
		}
		return math.Copysign(0, -1), true
	}
	return float64(m), true
}

// maxVector returns the largest of the logits in whole vectors (its sign arbitrary if that is a
// zero: the max instruction's choice between ±0), how many it looked at, and false if one of them
// is NaN (the max instruction's NaN result depends on operand order, so NaN is checked apart).
func maxVector(logits []float32) (m float32, n int, ok bool) {
	m = float32(math.Inf(-1))
	var store [16]float32
	lanes := store[:]
	i := 0
	defer archsimd.ClearAVXUpperBits()
	switch expWidth {
	case 8:
		if len(logits) < 16 {
			return m, 0, true
		}
		acc := archsimd.BroadcastFloat32x16(m)
		nan := acc.NotEqual(acc)
		for ; i+16 <= len(logits); i += 16 {
			x := archsimd.LoadFloat32x16((*[16]float32)(logits[i : i+16]))
			acc = acc.Max(x)
			nan = nan.Or(x.NotEqual(x))
		}
		if nan.ToBits() != 0 {
			return m, i, false
		}
		acc.Store(&store)
	case 4:
		if len(logits) < 8 {
			return m, 0, true
		}
		acc := archsimd.BroadcastFloat32x8(m)
		nan := acc.NotEqual(acc)
		for ; i+8 <= len(logits); i += 8 {
			x := archsimd.LoadFloat32x8((*[8]float32)(logits[i : i+8]))
			acc = acc.Max(x)
			nan = nan.Or(x.NotEqual(x))
		}
		if nan.ToBits() != 0 {
			return m, i, false
		}
		lanes = store[:8]
		acc.Store((*[8]float32)(lanes))
	default:
		return m, 0, true
	}
	for _, v := range lanes {
		if v > m {
			m = v
		}
	}
	return m, i, true
}

// shiftVector sets dst[i] = float64(src[i]) - mx, logProbScalar's argument to math.Exp (the
// conversion is exact and the subtraction one IEEE operation in either form). len(dst) ≥ len(src).
func shiftVector(dst []float64, src []float32, mx float64) {
	dst = dst[:len(src)]
	i := 0
	switch expWidth {
	case 8:
		m := archsimd.BroadcastFloat64x8(mx)
		for ; i+8 <= len(src); i += 8 {
			x := archsimd.LoadFloat32x8((*[8]float32)(src[i : i+8])).ConvertToFloat64()
			x.Sub(m).Store((*[8]float64)(dst[i : i+8]))
		}
	case 4:
		m := archsimd.BroadcastFloat64x4(mx)
		for ; i+4 <= len(src); i += 4 {
			x := archsimd.LoadFloat32x4((*[4]float32)(src[i : i+4])).ConvertToFloat64()
			x.Sub(m).Store((*[4]float64)(dst[i : i+4]))
		}
	}
	// Go's scalar float code is non-VEX SSE, which pays for dirty upper vector halves.
	archsimd.ClearAVXUpperBits()
	for ; i < len(src); i++ {
		dst[i] = float64(src[i]) - mx
	}
}

// expVector sets dst[i] = math.Exp(src[i]), bit for bit, for any arguments; dst may be src.
// len(dst) ≥ len(src).
func expVector(dst, src []float64) {
	dst = dst[:len(src)]
	i := 0
	switch expWidth {
	case 8:
		i = expVector8(dst, src)
	case 4:
		i = expVector4(dst, src)
	}
	for ; i < len(src); i++ {
		dst[i] = math.Exp(src[i])
	}
}

// expVector8 is expVector's AVX-512 loop over whole vectors of 8; it returns how many it did.
// Each line below is one instruction of archExp's avxfma branch, in its order.
func expVector8(dst, src []float64) int {
	defer archsimd.ClearAVXUpperBits()
	log2e, round := archsimd.BroadcastFloat64x8(expLog2E), archsimd.BroadcastFloat64x8(expRound)
	ln2u, ln2l := archsimd.BroadcastFloat64x8(expLn2U), archsimd.BroadcastFloat64x8(expLn2L)
	p6, p5 := archsimd.BroadcastFloat64x8(expP6), archsimd.BroadcastFloat64x8(expP5)
	p4, p3 := archsimd.BroadcastFloat64x8(expP4), archsimd.BroadcastFloat64x8(expP3)
	p2, p1 := archsimd.BroadcastFloat64x8(expP2), archsimd.BroadcastFloat64x8(expP1)
	half, one, two := archsimd.BroadcastFloat64x8(0.5), archsimd.BroadcastFloat64x8(1), archsimd.BroadcastFloat64x8(2)
	sixteenth, bias := archsimd.BroadcastFloat64x8(0.0625), archsimd.BroadcastUint64x8(0x3FF)
	lowest, highest := archsimd.BroadcastFloat64x8(expLowest), archsimd.BroadcastFloat64x8(expHighest)
	zeroAt := archsimd.BroadcastFloat64x8(expZeroAt)
	const all = 1<<8 - 1
	i := 0
	for ; i+8 <= len(src); i += 8 {
		x := archsimd.LoadFloat64x8((*[8]float64)(src[i : i+8]))
		inRange := x.GreaterEqual(lowest).And(x.LessEqual(highest))
		t := x.Mul(log2e).Add(round) // MULSD LOG2E; CVTSD2SL: k = t - round
		negk := round.Sub(t)         // -k, exactly (CVTSL2SD is exact)
		r := negk.MulAdd(ln2u, x)    // VFNMADD231SD LN2U
		r = negk.MulAdd(ln2l, r)     // VFNMADD231SD LN2L
		r = r.Mul(sixteenth)         // MULSD $0.0625
		p := p6.MulAdd(r, p5)        // VFMADD213SD ×8
		p = p.MulAdd(r, p4)
		p = p.MulAdd(r, p3)
		p = p.MulAdd(r, p2)
		p = p.MulAdd(r, p1)
		p = p.MulAdd(r, half)
		p = p.MulAdd(r, one)
		r = r.Mul(p)                  // MULSD X1, X0
		r = r.Mul(r.Add(two))         // VADDSD 2; MULSD
		r = r.Mul(r.Add(two))         // VADDSD 2; MULSD
		r = r.Mul(r.Add(two))         // VADDSD 2; MULSD
		r = r.Add(two).MulAdd(r, one) // VADDSD 2; VFMADD213SD 1
		// MULSD by 2^k (built from k's bits in t); +0 in the lanes out of range.
		scale := t.AsUint64x8().Add(bias).ShiftAllLeft(52).AsFloat64x8()
		e := r.Mul(scale).Masked(inRange)
		if inRange.Or(x.LessEqual(zeroAt)).ToBits() == all {
			e.Store((*[8]float64)(dst[i : i+8]))
			continue
		}
		// A lane archExp takes through a special path (NaN, ±Inf, overflow, a denormal result):
		// math.Exp itself.
		var xs [8]float64
		x.Store(&xs)
		e.Store((*[8]float64)(dst[i : i+8]))
		bits := inRange.ToBits()
		for j, v := range xs {
			if bits>>j&1 == 0 && !(v <= expZeroAt) {
				dst[i+j] = math.Exp(v)
			}
		}
	}
	return i
}

// expVector4 is expVector8 for AVX2: Float64x4, the same operations.
func expVector4(dst, src []float64) int {
	defer archsimd.ClearAVXUpperBits()
	log2e, round := archsimd.BroadcastFloat64x4(expLog2E), archsimd.BroadcastFloat64x4(expRound)
	ln2u, ln2l := archsimd.BroadcastFloat64x4(expLn2U), archsimd.BroadcastFloat64x4(expLn2L)
	p6, p5 := archsimd.BroadcastFloat64x4(expP6), archsimd.BroadcastFloat64x4(expP5)
	p4, p3 := archsimd.BroadcastFloat64x4(expP4), archsimd.BroadcastFloat64x4(expP3)
	p2, p1 := archsimd.BroadcastFloat64x4(expP2), archsimd.BroadcastFloat64x4(expP1)
	half, one, two := archsimd.BroadcastFloat64x4(0.5), archsimd.BroadcastFloat64x4(1), archsimd.BroadcastFloat64x4(2)
	sixteenth, bias := archsimd.BroadcastFloat64x4(0.0625), archsimd.BroadcastUint64x4(0x3FF)
	lowest, highest := archsimd.BroadcastFloat64x4(expLowest), archsimd.BroadcastFloat64x4(expHighest)
	zeroAt := archsimd.BroadcastFloat64x4(expZeroAt)
	const all = 1<<4 - 1
	i := 0
	for ; i+4 <= len(src); i += 4 {
		x := archsimd.LoadFloat64x4((*[4]float64)(src[i : i+4]))
		inRange := x.GreaterEqual(lowest).And(x.LessEqual(highest))
		t := x.Mul(log2e).Add(round)
		negk := round.Sub(t)
		r := negk.MulAdd(ln2u, x)
		r = negk.MulAdd(ln2l, r)
		r = r.Mul(sixteenth)
		p := p6.MulAdd(r, p5)
		p = p.MulAdd(r, p4)
		p = p.MulAdd(r, p3)
		p = p.MulAdd(r, p2)
		p = p.MulAdd(r, p1)
		p = p.MulAdd(r, half)
		p = p.MulAdd(r, one)
		r = r.Mul(p)
		r = r.Mul(r.Add(two))
		r = r.Mul(r.Add(two))
		r = r.Mul(r.Add(two))
		r = r.Add(two).MulAdd(r, one)
		scale := t.AsUint64x4().Add(bias).ShiftAllLeft(52).AsFloat64x4()
		e := r.Mul(scale).Masked(inRange)
		if inRange.Or(x.LessEqual(zeroAt)).ToBits() == all {
			e.Store((*[4]float64)(dst[i : i+4]))
			continue
		}
		var xs [4]float64
		x.Store(&xs)
		e.Store((*[4]float64)(dst[i : i+4]))
		bits := inRange.ToBits()
		for j, v := range xs {
			if bits>>j&1 == 0 && !(v <= expZeroAt) {
				dst[i+j] = math.Exp(v)
			}
		}
	}
	return i
}
