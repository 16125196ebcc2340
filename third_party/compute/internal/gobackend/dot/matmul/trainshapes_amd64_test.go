// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package matmul

import (
	"fmt"
	"runtime"
	"simd/archsimd"
	"syscall"
	"testing"
	"time"

	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/internal/gobackend/dot"
	"github.com/gomlx/compute/support/envutil"
)

// trainShapes are the float32 products of a base-preset training step (16×128 tokens: d 384, FFN
// 1024, 6 heads of 64 in 2 KV groups) and the largest of a small-preset one, as the op profile
// (tpu's TestTrainStepOpProfile) lists them.
var trainShapes = []struct {
	layout     dot.Layout
	B, M, K, N int
}{
	{dot.LayoutNonTransposed, 1, 2048, 384, 1024}, // FFN gate/up forward
	{dot.LayoutTransposed, 1, 2048, 1024, 384},    // FFN down, input gradient
	{dot.LayoutNonTransposed, 1, 1024, 2048, 384}, // FFN down, weight gradient
	{dot.LayoutTransposed, 1, 2048, 384, 1024},    // FFN gate/up, input gradient
	{dot.LayoutNonTransposed, 1, 2048, 1024, 384}, // FFN down forward
	{dot.LayoutNonTransposed, 1, 384, 2048, 1024}, // FFN gate/up, weight gradient
	{dot.LayoutNonTransposed, 1, 2048, 384, 384},  // attention out forward
	{dot.LayoutTransposed, 1, 2048, 384, 384},     // attention out, input gradient
	{dot.LayoutNonTransposed, 1, 384, 2048, 384},  // attention out, weight gradient
	{dot.LayoutTransposed, 32, 384, 64, 128},      // attention scores
	{dot.LayoutNonTransposed, 32, 384, 128, 64},   // attention probs·V
	// The small preset (d 128, FFN 384, 4 heads of 32 in 2 KV groups).
	{dot.LayoutTransposed, 1, 2048, 384, 128},    // FFN down, input gradient
	{dot.LayoutNonTransposed, 1, 384, 2048, 128}, // FFN down, weight gradient
	{dot.LayoutNonTransposed, 1, 2048, 128, 384}, // FFN gate/up forward
	{dot.LayoutNonTransposed, 32, 256, 128, 32},  // attention probs·V
	{dot.LayoutTransposed, 32, 256, 32, 128},     // attention scores
}

// threadCPU is the calling thread's CPU time (lock the goroutine to its thread around it).
func threadCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTrainShapes runs the float32 router (the kernel DotGeneral takes) on the training
// step's product shapes on one worker, reporting GFLOP per CPU-second of the thread (steadier
// than wall time on a shared machine) next to wall-time GFLOP/s:
//
//	cd third_party/compute && GOEXPERIMENT=simd go test ./internal/gobackend/dot/matmul/ -run '^$' -bench TrainShapes
func BenchmarkTrainShapes(b *testing.B) {
	be, err := gobackend.New("parallelism=1")
	if err != nil {
		b.Fatal(err)
	}
	backend := be.(*gobackend.Backend)
	type kernel struct {
		name string
		fn   func(*gobackend.Backend, dot.Layout, []float32, []float32, int, int, int, int, []float32)
	}
	var kernels []kernel
	if archsimd.X86.AVX512() && envutil.MustReadBool(envutil.SIMD_AVX512_Env, true) {
		kernels = []kernel{{"avx512/router", avx512RouterFloat32}, {"avx512/packing", avx512LargeFloat32}}
	} else if archsimd.X86.AVX2() {
		kernels = []kernel{{"avx2/router", avx2RouterFloat32}, {"avx2/packing", avx2LargeFloat32},
			{"avx2/panel", avx2PanelKernel.run}}
	} else {
		b.Skip("no AVX2")
	}
	for _, s := range trainShapes {
		lhs := make([]float32, s.B*s.M*s.K)
		rhs := make([]float32, s.B*s.K*s.N)
		out := make([]float32, s.B*s.M*s.N)
		for i := range lhs {
			lhs[i] = float32(i%7) / 7
		}
		for i := range rhs {
			rhs[i] = float32(i%5) / 5
		}
		for _, kern := range kernels {
			name := fmt.Sprintf("%s/%s/B%d_M%d_K%d_N%d", kern.name, s.layout, s.B, s.M, s.K, s.N)
			b.Run(name, func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				kern.fn(backend, s.layout, lhs, rhs, s.B, s.M, s.N, s.K, out) // warm the pools
				b.ResetTimer()
				cpu0 := threadCPU()
				for range b.N {
					kern.fn(backend, s.layout, lhs, rhs, s.B, s.M, s.N, s.K, out)
				}
				cpu := threadCPU() - cpu0
				flops := 2 * float64(s.B*s.M*s.N*s.K) * float64(b.N)
				b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				b.ReportMetric(flops/cpu.Seconds()/1e9, "GFLOP/cpu-s")
			})
		}
	}
}
