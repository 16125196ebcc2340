// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package matmul

import (
	"fmt"
	"github.com/gomlx/compute/internal/gobackend"
	"math"
	"math/rand/v2"
	"simd/archsimd"
	"testing"
)

// TestAVX512SmallRegMatchesReference: the register-blocked kernel against a float64 reference on
// random shapes (row and column remainders included), and bit-identical to the kernel it replaced
// on whole vectors of columns.
func TestAVX512SmallRegMatchesReference(t *testing.T) {
	if !archsimd.X86.AVX512() {
		t.Skip("no AVX-512")
	}
	rng := rand.New(rand.NewPCG(11, 12))
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
		avx512SmallRegFloat32(lhs, rhs, 0, B, M, N, K, got)
		avx512SmallFloat32(lhs, rhs, 0, B, M, N, K, old)
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
					if j < N-N%16 && got[idx] != old[idx] {
						t.Fatalf("trial %d (B%d M%d N%d K%d) [%d,%d,%d] = %g, previous kernel %g", trial, B, M, N, K, b, i, j, got[idx], old[idx])
					}
				}
			}
		}
	}
}

// BenchmarkAVX512SmallReg compares the register-blocked kernel with the one it replaced on decode
// shapes (64 rows) and on a decode attention shape (2 rows, batch 128), one thread:
//
//	cd third_party/compute && GOEXPERIMENT=simd go test ./internal/gobackend/dot/matmul/ -run '^$' -bench AVX512SmallReg
func BenchmarkAVX512SmallReg(b *testing.B) {
	if !archsimd.X86.AVX512() {
		b.Skip("no AVX-512")
	}
	for _, s := range []struct{ B, M, N, K int }{{1, 64, 384, 128}, {1, 64, 768, 128}, {1, 64, 256, 128}, {1, 64, 128, 384}, {1, 64, 1024, 384}, {1, 64, 2048, 384}, {128, 2, 128, 16}, {128, 2, 128, 32}, {128, 2, 32, 128}} {
		lhs := make([]float32, s.B*s.M*s.K)
		rhs := make([]float32, s.B*s.K*s.N)
		out := make([]float32, s.B*s.M*s.N)
		for i := range lhs {
			lhs[i] = float32(i%7) / 7
		}
		for i := range rhs {
			rhs[i] = float32(i%5) / 5
		}
		for _, k := range []struct {
			name string
			fn   func(lhs, rhs []float32, batchStart, batchCount, M, N, K int, output []float32)
		}{{"previous", avx512SmallFloat32}, {"registers", avx512SmallRegFloat32}} {
			b.Run(fmt.Sprintf("%s/%dx%dx%dx%d", k.name, s.B, s.M, s.N, s.K), func(b *testing.B) {
				for range b.N {
					k.fn(lhs, rhs, 0, s.B, s.M, s.N, s.K, out)
				}
				b.ReportMetric(float64(2*s.B*s.M*s.N*s.K)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// TestAVX512SmallRegByColumns: the product split by column ranges across workers gives the bits of
// the single-worker kernel, on widths that do and do not divide into whole strips (one batch item:
// the strips taken from both ends of each worker's range, with their spread prefetches, Temper
// fork; rows past the eight-row tiles; fewer k than row tiles; more ranges than workers arrive, down
// to the caller alone).
func TestAVX512SmallRegByColumns(t *testing.T) {
	if !archsimd.X86.AVX512() {
		t.Skip("no AVX-512")
	}
	bk, err := gobackend.New("")
	if err != nil {
		t.Fatal(err)
	}
	backend := bk.(*gobackend.Backend)
	defer backend.Finalize()
	// A pool of one: only the caller arrives, so it takes its own range and every other range from
	// the back (the path of workers that join late), whatever the machine's core count.
	sk, err := gobackend.New("parallelism=1")
	if err != nil {
		t.Fatal(err)
	}
	single := sk.(*gobackend.Backend)
	defer single.Finalize()
	rng := rand.New(rand.NewPCG(31, 32))
	for _, s := range []struct{ B, M, N, K int }{{1, 64, 256, 48}, {1, 7, 100, 33}, {2, 5, 70, 9}, {1, 64, 2048, 40}, {1, 64, 2048, 384}, {1, 13, 96, 7}, {1, 64, 80, 3}, {1, 9, 64, 1}, {1, 16, 65, 5}, {1, 72, 640, 20}} {
		lhs := make([]float32, s.B*s.M*s.K)
		rhs := make([]float32, s.B*s.K*s.N)
		for i := range lhs {
			lhs[i] = rng.Float32()*2 - 1
		}
		for i := range rhs {
			rhs[i] = rng.Float32()*2 - 1
		}
		want := make([]float32, s.B*s.M*s.N)
		avx512SmallRegFloat32(lhs, rhs, 0, s.B, s.M, s.N, s.K, want)
		for _, be := range []*gobackend.Backend{backend, single} {
			for _, workers := range []int{2, 3, 5} {
				got := make([]float32, len(want))
				avx512SmallRegByColumns(be, lhs, rhs, s.B, s.M, s.N, s.K, got, workers)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%+v, %d workers (pool of %d): [%d] = %g, one worker %g", s, workers, be.Workers.AdjustedMaxParallelism(), i, got[i], want[i])
					}
				}
			}
		}
	}
}
