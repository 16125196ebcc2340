// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package matmul

import (
	"math"
	"math/rand/v2"
	"simd/archsimd"
	"testing"

	"github.com/gomlx/compute/internal/gobackend"
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
		if trial%10 == 0 { // decode-sized row counts (several 8-row tiles, packed strips)
			M = 16 + rng.IntN(55)
		}
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

// TestAVX2SmallRegByColumns: the product split by column ranges across workers gives the bits of the
// single-worker kernel, on widths that do and do not divide into whole strips and row counts with
// and without whole 6-row tiles.
func TestAVX2SmallRegByColumns(t *testing.T) {
	if !archsimd.X86.AVX2() {
		t.Skip("no AVX2")
	}
	bk, err := gobackend.New("")
	if err != nil {
		t.Fatal(err)
	}
	backend := bk.(*gobackend.Backend)
	defer backend.Finalize()
	rng := rand.New(rand.NewPCG(33, 34))
	for _, s := range []struct{ B, M, N, K int }{{1, 64, 256, 48}, {1, 7, 100, 33}, {2, 5, 70, 9}, {1, 64, 2048, 40}, {1, 13, 37, 21}} {
		lhs := make([]float32, s.B*s.M*s.K)
		rhs := make([]float32, s.B*s.K*s.N)
		for i := range lhs {
			lhs[i] = rng.Float32()*2 - 1
		}
		for i := range rhs {
			rhs[i] = rng.Float32()*2 - 1
		}
		want := make([]float32, s.B*s.M*s.N)
		avx2SmallRegFloat32(lhs, rhs, 0, s.B, s.M, s.N, s.K, want)
		for _, workers := range []int{2, 3, 5} {
			got := make([]float32, len(want))
			avx2SmallRegByColumns(backend, lhs, rhs, s.B, s.M, s.N, s.K, got, workers)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%+v, %d workers: [%d] = %g, one worker %g", s, workers, i, got[i], want[i])
				}
			}
		}
	}
}
