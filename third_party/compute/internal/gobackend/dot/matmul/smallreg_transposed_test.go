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

// TestSmallTransposedViaRegisters: lhs · rhsᵀ through the transpose and the register kernel
// against a float64 reference, on ragged shapes.
func TestSmallTransposedViaRegisters(t *testing.T) {
	bk, err := gobackend.New("")
	if err != nil {
		t.Fatal(err)
	}
	backend := bk.(*gobackend.Backend)
	defer backend.Finalize()
	rng := rand.New(rand.NewPCG(21, 22))
	kernels := map[string]func(*gobackend.Backend, []float32, []float32, int, int, int, int, []float32) bool{}
	if archsimd.X86.AVX512() {
		kernels["avx512"] = avx512SmallTransposedViaRegisters
	}
	if archsimd.X86.AVX2() {
		kernels["avx2"] = avx2SmallTransposedViaRegisters
	}
	for name, kernel := range kernels {
		for trial := range 100 {
			B, M, N, K := 1+rng.IntN(3), 8+rng.IntN(40), 1+rng.IntN(70), 1+rng.IntN(50)
			lhs := make([]float32, B*M*K)
			rhs := make([]float32, B*N*K)
			for i := range lhs {
				lhs[i] = rng.Float32()*2 - 1
			}
			for i := range rhs {
				rhs[i] = rng.Float32()*2 - 1
			}
			out := make([]float32, B*M*N)
			if !kernel(backend, lhs, rhs, B, M, N, K, out) {
				t.Fatal("no buffer")
			}
			for b := range B {
				for i := range M {
					for j := range N {
						var want float64
						for k := range K {
							want += float64(lhs[(b*M+i)*K+k]) * float64(rhs[(b*N+j)*K+k])
						}
						if got := out[(b*M+i)*N+j]; math.Abs(float64(got)-want) > 1e-5*float64(K) {
							t.Fatalf("%s trial %d (B%d M%d N%d K%d) [%d,%d,%d] = %g, want %g", name, trial, B, M, N, K, b, i, j, got, want)
						}
					}
				}
			}
		}
	}
}

// TestTransposeBlocked: every element lands at its transposed place, on shapes with and without
// whole 8×8 blocks and ragged edges on either side.
func TestTransposeBlocked(t *testing.T) {
	if !archsimd.X86.AVX2() {
		t.Skip("no AVX2: transposeBlocked runs on the AVX2 and AVX-512 routers only")
	}
	for _, s := range [][2]int{{1, 1}, {1, 9}, {9, 1}, {7, 7}, {8, 8}, {8, 16}, {16, 8}, {9, 17}, {17, 9}, {23, 40}, {264, 384}, {384, 264}, {65, 1031}} {
		rows, cols := s[0], s[1]
		src := make([]float32, rows*cols)
		for i := range src {
			src[i] = float32(i) + 0.5
		}
		dst := make([]float32, rows*cols+8)
		for i := range dst {
			dst[i] = -1
		}
		transposeBlocked(src, dst[:rows*cols], rows, cols)
		for r := range rows {
			for c := range cols {
				if got, want := dst[c*rows+r], src[r*cols+c]; got != want {
					t.Fatalf("%d×%d: dst[%d,%d] = %g, want %g", rows, cols, c, r, got, want)
				}
			}
		}
		for i := rows * cols; i < len(dst); i++ {
			if dst[i] != -1 {
				t.Fatalf("%d×%d: wrote past the end at %d", rows, cols, i)
			}
		}
	}
}

func BenchmarkTransposeBlocked(b *testing.B) {
	src := make([]float32, 264*384)
	dst := make([]float32, 264*384)
	for range b.N {
		transposeBlocked(src, dst, 264, 384)
	}
}
