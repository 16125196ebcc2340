// Temper fork: see third_party/README.md.

package matmul

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestStridedFloat32 checks StridedFloat32 on random strided tiles (row and column remainders of
// the 6 × 16 tile, k of 1 to 70, strides wider than the tiles) against a float64 reference, that it
// writes nothing outside the tile, and that an element's bits do not depend on the tile around it:
// a sub-product starting at another row and column, and the transposed product bᵀ·aᵀ, give the
// same bits for the same element (what the blocked attention's forward and backward rely on).
func TestStridedFloat32(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 200 {
		m, n, k := 1+rng.IntN(20), 1+rng.IntN(70), 1+rng.IntN(70)
		lda, ldb, ldc := k+rng.IntN(5), n+rng.IntN(5), n+rng.IntN(5)
		a := randSlice(rng, m*lda)
		b := randSlice(rng, k*ldb)
		const sentinel = float32(12345)
		c := make([]float32, m*ldc)
		for i := range c {
			c[i] = sentinel
		}
		StridedFloat32(m, n, k, a, lda, b, ldb, c, ldc)
		for i := range m {
			for j := range ldc {
				got := c[i*ldc+j]
				if j >= n {
					if got != sentinel {
						t.Fatalf("trial %d: wrote c[%d][%d] outside the %dx%d tile", trial, i, j, m, n)
					}
					continue
				}
				var want float64
				for kk := range k {
					want += float64(a[i*lda+kk]) * float64(b[kk*ldb+j])
				}
				if math.Abs(float64(got)-want) > 1e-5*(1+math.Abs(want)) {
					t.Fatalf("trial %d (m=%d n=%d k=%d): c[%d][%d]=%g, want %g", trial, m, n, k, i, j, got, want)
				}
			}
		}
		// The same elements from a sub-product that starts at row i0, column j0.
		i0, j0 := rng.IntN(m), rng.IntN(n)
		sub := make([]float32, (m-i0)*(n-j0))
		StridedFloat32(m-i0, n-j0, k, a[i0*lda:], lda, b[j0:], ldb, sub, n-j0)
		for i := range m - i0 {
			for j := range n - j0 {
				if math.Float32bits(sub[i*(n-j0)+j]) != math.Float32bits(c[(i+i0)*ldc+j+j0]) {
					t.Fatalf("trial %d: element (%d,%d) has other bits in the sub-product from (%d,%d)", trial, i+i0, j+j0, i0, j0)
				}
			}
		}
		// bᵀ·aᵀ: transpose the operands, multiply, compare transposed.
		at, bt := make([]float32, k*m), make([]float32, n*k)
		for i := range m {
			for kk := range k {
				at[kk*m+i] = a[i*lda+kk]
			}
		}
		for kk := range k {
			for j := range n {
				bt[j*k+kk] = b[kk*ldb+j]
			}
		}
		ct := make([]float32, n*m)
		StridedFloat32(n, m, k, bt, k, at, m, ct, m)
		for i := range m {
			for j := range n {
				if math.Float32bits(ct[j*m+i]) != math.Float32bits(c[i*ldc+j]) {
					t.Fatalf("trial %d: element (%d,%d) of bᵀ·aᵀ has other bits", trial, i, j)
				}
			}
		}
	}
}

func randSlice(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = rng.Float32()*2 - 1
	}
	return s
}
