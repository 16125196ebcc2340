// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package fusedops

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/compute/internal/fastmath"
)

// decodeRowsRef is decodeRows as it was before its softmax went through decodeSoftmaxVector and
// decodeDivVector (row by row: vecScaleMax, vecSubScalar, Exp32Slice, vecSum, math.Log, vecDiv):
// the reference whose bits decodeRows must keep.
func decodeRowsRef(data *flashAttnData, o, lse, q, kHead, vHead []float32, vis []int32, sc []float32) {
	clear(o)
	nr, n := len(lse), len(vis)
	if n == 0 {
		for r := range lse {
			lse[r] = negInf
		}
		return
	}
	groupScores(sc, q, nr, kHead, vis)
	sums := [decodeGroup]float32{}
	for r := range nr {
		row := sc[r*n : (r+1)*n]
		var mx float32
		if c := data.softcap; c > 0 {
			if data.scale != 1 {
				vecScale(row, data.scale)
			}
			for y, x := range row {
				row[y] = float32(math.Tanh(float64(x/c))) * c
			}
			mx = vecMax(row)
		} else {
			mx = vecScaleMax(row, data.scale)
		}
		vecSubScalar(row, mx)
		fastmath.Exp32Slice(row, row)
		sums[r] = vecSum(row)
		lse[r] = mx + float32(math.Log(float64(sums[r])))
	}
	groupAccumulate(o, sc, nr, vHead, vis)
	d := len(o) / nr
	for r := range nr {
		vecDiv(o[r*d:(r+1)*d], sums[r])
	}
}

// TestDecodeRowsSameBits: decodeRows gives decodeRowsRef's outputs and log-sum-exps bit for bit
// (NaNs included), for 1 to 3 rows, head_dims 8, 24, 32 and 64, 0 to 130 visible keys (all or a
// random subset of the cache), with and without a soft cap, scales 1 and 0.125, and rows whose
// scores are huge (exp under- and overflow before the max is subtracted, −104 < x − max < −87),
// ±Inf or NaN (all of a row's or one among finite ones); with the vector loops as the machine has them and, on AVX-512, without.
func TestDecodeRowsSameBits(t *testing.T) {
	t.Run("machine", testDecodeRowsSameBits)
	if vecAVX512 {
		t.Run("noAVX512", func(t *testing.T) {
			vecAVX512 = false
			defer func() { vecAVX512 = true }()
			testDecodeRowsSameBits(t)
		})
	}
}

func testDecodeRowsSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	bitsEqual := func(a, b []float32) int {
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				return i
			}
		}
		return -1
	}
	cases := 0
	for _, d := range []int{8, 32, 64, 24} {
		for nr := 1; nr <= decodeGroup; nr++ {
			for n := 0; n <= 130; n++ {
				for _, softcap := range []float32{0, 30} {
					for _, scale := range []float32{1, 0.125} {
						for kind := range 7 {
							keys := n + rng.IntN(8)
							vis := make([]int32, 0, keys)
							for j := range keys {
								if len(vis) < n && (keys-j == n-len(vis) || rng.IntN(4) != 0) {
									vis = append(vis, int32(j))
								}
							}
							q, k, v := make([]float32, nr*d), make([]float32, keys*d), make([]float32, keys*d)
							for i := range q {
								q[i] = float32(rng.NormFloat64())
							}
							for i := range k {
								k[i], v[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
							}
							switch kind {
							case 1: // huge scores: e^x over- and underflows, and x − max reaches past −87 and −104
								for i := range q {
									q[i] *= 40
								}
							case 2: // scores spread over [−120·scale, 0]-ish: every exp branch within a row
								for i := range k {
									k[i] *= float32(1 + rng.IntN(12))
								}
							case 3: // one key of +Inf or −Inf (scores ±Inf, NaN)
								if keys > 0 {
									k[rng.IntN(keys)*d] = float32(math.Inf(1 - 2*rng.IntN(2)))
								}
							case 4: // a NaN query element in one row
								q[rng.IntN(len(q))] = float32(math.NaN())
							case 5: // all scores equal (ties, sum exactly n)
								for i := range k {
									k[i] = 0
								}
							case 6: // a NaN key element: one NaN score per row among finite ones
								if keys > 0 {
									k[rng.IntN(keys)*d+rng.IntN(d)] = float32(math.NaN())
								}
							}
							data := &flashAttnData{scale: scale, softcap: softcap}
							o, lse, sc := make([]float32, nr*d), make([]float32, nr), make([]float32, nr*n)
							wo, wlse, wsc := make([]float32, nr*d), make([]float32, nr), make([]float32, nr*n)
							decodeRows(data, o, lse, q, k, v, vis, sc)
							decodeRowsRef(data, wo, wlse, q, k, v, vis, wsc)
							if i := bitsEqual(lse, wlse); i >= 0 {
								t.Fatalf("d=%d nr=%d n=%d softcap=%g scale=%g kind=%d: lse[%d] = %g (%#x), want %g (%#x)",
									d, nr, n, softcap, scale, kind, i, lse[i], math.Float32bits(lse[i]), wlse[i], math.Float32bits(wlse[i]))
							}
							if i := bitsEqual(o, wo); i >= 0 {
								t.Fatalf("d=%d nr=%d n=%d softcap=%g scale=%g kind=%d: o[%d] = %g (%#x), want %g (%#x)",
									d, nr, n, softcap, scale, kind, i, o[i], math.Float32bits(o[i]), wo[i], math.Float32bits(wo[i]))
							}
							cases++
						}
					}
				}
			}
		}
	}
	t.Logf("%d cases", cases)
}
