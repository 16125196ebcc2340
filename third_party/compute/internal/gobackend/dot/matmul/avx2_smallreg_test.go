// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package matmul

import (
	"math"
	"math/rand/v2"
	"simd/archsimd"
	"testing"
)

// TestAVX2SmallRegMatchesReference: the AVX2 register-blocked kernel against a float64 reference on
// random shapes (row and column remainders, one and two rows included), and bit-identical to the
// kernel it replaced on whole vectors of columns. Runs on any AVX2 machine (AVX-512 ones too).
func TestAVX2SmallRegMatchesReference(t *testing.T) {
	if !archsimd.X86.AVX2() {
		t.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(13, 14))
	for trial := range 300 {
		B, M, N, K := 1+rng.IntN(3), 1+rng.IntN(11), 1+rng.IntN(80), 1+rng.IntN(70)
		lhs := make([]float32, B*M*K)
		rhs := make([]float32, B*K*N)
		for i := range lhs {
			lhs[i] = rng.Float32()*2 - 1
		}
		for i := range rhs {
			rhs[i] = rng.Float32()*2 - 1
		}
		got := make([]float32, B*M*N)
		old := make([]float32, B*M*N)
		avx2SmallRegFloat32(lhs, rhs, 0, B, M, N, K, got)
		avx2SmallFloat32(lhs, rhs, 0, B, M, N, K, old)
		for b := range B {
			for i := range M {
				for j := range N {
					var want float64
					for k := range K {
						want += float64(lhs[b*M*K+i*K+k]) * float64(rhs[b*K*N+k*N+j])
					}
					idx := b*M*N + i*N + j
					if math.Abs(float64(got[idx])-want) > 1e-5*float64(K) {
						t.Fatalf("trial %d (B%d M%d N%d K%d) [%d,%d,%d] = %g, want %g", trial, B, M, N, K, b, i, j, got[idx], want)
					}
					if j < N-N%8 && got[idx] != old[idx] {
						t.Fatalf("trial %d (B%d M%d N%d K%d) [%d,%d,%d] = %g, previous kernel %g", trial, B, M, N, K, b, i, j, got[idx], old[idx])
					}
				}
			}
		}
	}
}
