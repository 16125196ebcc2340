// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package matmul

import (
	"fmt"
	"math"
	"math/rand/v2"
	"simd/archsimd"
	"testing"
	"unsafe"

	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/internal/gobackend/dot"
)

// TestPanelKernelMatchesPacking: the panel kernels give the packing kernel's bits, element for
// element, on both layouts, batches, row and column remainders, contracting sizes that do and do
// not fill the last panel, on one worker and on several (how the work is split must not matter).
// The AVX-512 kernel's driver (8 × 32 tiles that only store) runs here with an emulated tile of the
// same shape, whatever the machine; the AVX-512 kernel itself where the CPU has AVX-512.
func TestPanelKernelMatchesPacking(t *testing.T) {
	if !archsimd.X86.AVX2() {
		t.Skip("no AVX2")
	}
	backends := map[string]*gobackend.Backend{}
	for _, p := range []int{1, 2, 3} {
		be, err := gobackend.New(fmt.Sprintf("parallelism=%d", p))
		if err != nil {
			t.Fatal(err)
		}
		backends[fmt.Sprint(p)] = be.(*gobackend.Backend)
	}
	type largeFn func(*gobackend.Backend, dot.Layout, []float32, []float32, int, int, int, int, []float32)
	emulated := avx512PanelKernel
	emulated.tile = emulatedStoreTile(8, 32)
	kernels := []struct {
		name    string
		kernel  panelKernel
		packing largeFn
	}{
		{"avx2", avx2PanelKernel, avx2LargeFloat32},
		{"8x32-emulated", emulated, avx2LargeFloat32},
	}
	if archsimd.X86.AVX512() {
		kernels = append(kernels, struct {
			name    string
			kernel  panelKernel
			packing largeFn
		}{"avx512", avx512PanelKernel, avx512LargeFloat32})
	}
	rng := rand.New(rand.NewPCG(39, 4))
	shapes := []struct{ B, M, N, K int }{
		{1, 6, 16, 128}, {1, 12, 32, 256}, {1, 7, 17, 129}, {2, 100, 70, 300}, {1, 97, 530, 200},
		{3, 31, 600, 385}, {1, 200, 1030, 64}, {1, 1, 1, 1}, {4, 5, 15, 1000}, {1, 192, 48, 2048},
		{1, 16, 64, 300},
	}
	fixed, random := len(shapes), 20
	if testing.Short() {
		random = 6
	}
	for range random {
		shapes = append(shapes, struct{ B, M, N, K int }{1 + rng.IntN(3), 1 + rng.IntN(130), 1 + rng.IntN(600), 1 + rng.IntN(700)})
	}
	for si, s := range shapes {
		lhs := make([]float32, s.B*s.M*s.K)
		rhs := make([]float32, s.B*s.K*s.N)
		for i := range lhs {
			lhs[i] = rng.Float32()*2 - 1
		}
		for i := range rhs {
			rhs[i] = rng.Float32()*2 - 1
		}
		for _, layout := range []dot.Layout{dot.LayoutNonTransposed, dot.LayoutTransposed} {
			for _, kern := range kernels {
				if kern.name == "8x32-emulated" && si >= fixed { // slow: the fixed shapes cover its edges
					continue
				}
				want := make([]float32, s.B*s.M*s.N)
				kern.packing(backends["1"], layout, lhs, rhs, s.B, s.M, s.N, s.K, want)
				checkReference(t, layout, lhs, rhs, s.B, s.M, s.N, s.K, want)
				for name, be := range backends {
					got := make([]float32, s.B*s.M*s.N)
					for i := range got {
						got[i] = float32(math.NaN()) // every element must be written
					}
					kern.kernel.run(be, layout, lhs, rhs, s.B, s.M, s.N, s.K, got)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s %s B%d M%d N%d K%d, %s workers: element %d = %g, packing kernel %g",
								kern.name, layout, s.B, s.M, s.N, s.K, name, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// emulatedStoreTile is a rows × cols panel tile in Go (AVX2 vectors of 8): each accumulator the same
// fused multiply-add chain from zero as the assembly tiles, stored (add is ignored, as the AVX-512
// tile's is).
func emulatedStoreTile(rows, cols int) func(l *float32, ldl int, r *float32, o *float32, ldo int, k int, add int) {
	return func(l *float32, ldl int, r *float32, o *float32, ldo int, k int, _ int) {
		L := unsafe.Slice(l, (rows-1)*ldl+k)
		R := unsafe.Slice(r, k*cols)
		O := unsafe.Slice(o, (rows-1)*ldo+cols)
		acc := make([]archsimd.Float32x8, cols/8)
		for i := range rows {
			clear(acc)
			for kk := range k {
				b := archsimd.BroadcastFloat32x8(L[i*ldl+kk])
				for c := range acc {
					acc[c] = b.MulAdd(archsimd.LoadFloat32x8((*[8]float32)(R[kk*cols+8*c:kk*cols+8*c+8])), acc[c])
				}
			}
			for c := range acc {
				acc[c].Store((*[8]float32)(O[i*ldo+8*c : i*ldo+8*c+8]))
			}
		}
	}
}

// checkReference checks a product against float64 sums (so that both kernels agreeing is not both
// being wrong the same way).
func checkReference(t *testing.T, layout dot.Layout, lhs, rhs []float32, B, M, N, K int, out []float32) {
	t.Helper()
	for b := range B {
		for i := range M {
			for j := range N {
				var want float64
				for k := range K {
					r := rhs[b*K*N+k*N+j]
					if layout == dot.LayoutTransposed {
						r = rhs[b*K*N+j*K+k]
					}
					want += float64(lhs[b*M*K+i*K+k]) * float64(r)
				}
				if got := out[b*M*N+i*N+j]; math.Abs(float64(got)-want) > 1e-5*float64(K) {
					t.Fatalf("%s B%d M%d N%d K%d [%d,%d,%d] = %g, want %g", layout, B, M, N, K, b, i, j, got, want)
				}
			}
		}
	}
}

// TestPanelKernelMatchesSmallTransposed: with the contracting axis in one panel (K <= 128) the AVX2
// panel kernel gives the small transposed-via-registers kernel's bits (one fused multiply-add chain
// from zero per element), so the router may send those products to it.
func TestPanelKernelMatchesSmallTransposed(t *testing.T) {
	if !archsimd.X86.AVX2() {
		t.Skip("no AVX2")
	}
	be, err := gobackend.New("parallelism=2")
	if err != nil {
		t.Fatal(err)
	}
	backend := be.(*gobackend.Backend)
	rng := rand.New(rand.NewPCG(39, 6))
	shapes := []struct{ B, M, N, K int }{{32, 256, 128, 32}, {32, 384, 128, 64}, {3, 17, 40, 128}, {1, 16, 7, 1}}
	for range 10 {
		shapes = append(shapes, struct{ B, M, N, K int }{1 + rng.IntN(5), 16 + rng.IntN(100), 1 + rng.IntN(150), 1 + rng.IntN(128)})
	}
	for _, s := range shapes {
		lhs := make([]float32, s.B*s.M*s.K)
		rhs := make([]float32, s.B*s.N*s.K)
		for i := range lhs {
			lhs[i] = rng.Float32()*2 - 1
		}
		for i := range rhs {
			rhs[i] = rng.Float32()*2 - 1
		}
		want := make([]float32, s.B*s.M*s.N)
		if !avx2SmallTransposedViaRegisters(backend, lhs, rhs, s.B, s.M, s.N, s.K, want) {
			t.Fatal("no buffer")
		}
		got := make([]float32, len(want))
		avx2PanelKernel.run(backend, dot.LayoutTransposed, lhs, rhs, s.B, s.M, s.N, s.K, got)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("B%d M%d N%d K%d: element %d = %g, register kernel %g", s.B, s.M, s.N, s.K, i, got[i], want[i])
			}
		}
	}
}

// TestAVX512SmallMatchesPanelNarrow: a small non-transposed float32 product (decode's one or two
// rows per sequence) gives the panel kernel's bits (a full forward's products) whatever the width
// of its right side, also below one vector (head_dim 8: probs·V): the KV cache is then exact.
// K stays within one contracting panel (128), where the panel's chain is the small kernel's.
func TestAVX512SmallMatchesPanelNarrow(t *testing.T) {
	if !archsimd.X86.AVX512() {
		t.Skip("no AVX-512")
	}
	be, err := gobackend.New("parallelism=2")
	if err != nil {
		t.Fatal(err)
	}
	backend := be.(*gobackend.Backend)
	rng := rand.New(rand.NewPCG(43, 8))
	shapes := []struct{ B, M, N, K int }{{8, 1, 8, 20}, {8, 2, 8, 24}, {1, 3, 5, 7}, {4, 1, 15, 128}, {1, 1, 1, 1}, {8, 2, 16, 9}}
	for range 20 {
		shapes = append(shapes, struct{ B, M, N, K int }{1 + rng.IntN(8), 1 + rng.IntN(4), 1 + rng.IntN(40), 1 + rng.IntN(128)})
	}
	for _, s := range shapes {
		lhs := make([]float32, s.B*s.M*s.K)
		rhs := make([]float32, s.B*s.N*s.K)
		for i := range lhs {
			lhs[i] = rng.Float32()*2 - 1
		}
		for i := range rhs {
			rhs[i] = rng.Float32()*2 - 1
		}
		want := make([]float32, s.B*s.M*s.N)
		avx512PanelKernel.run(backend, dot.LayoutNonTransposed, lhs, rhs, s.B, s.M, s.N, s.K, want)
		got := make([]float32, len(want))
		avx512RouterFloat32(backend, dot.LayoutNonTransposed, lhs, rhs, s.B, s.M, s.N, s.K, got)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("B%d M%d N%d K%d: element %d = %g, panel kernel %g", s.B, s.M, s.N, s.K, i, got[i], want[i])
			}
		}
	}
}

// TestAVX512SmallTransposedReference: upstream's small transposed float32 kernel (the attention
// scores of short sequences) against float64 dot products, for batch ranges that start past the
// first item and end at the last (its pointer arithmetic; under -race, checkptr checks it too).
func TestAVX512SmallTransposedReference(t *testing.T) {
	if !archsimd.X86.AVX512() {
		t.Skip("no AVX-512")
	}
	rng := rand.New(rand.NewPCG(7, 39))
	for _, s := range []struct{ B, start, count, M, N, K int }{
		{1, 0, 1, 1, 1, 1}, {3, 1, 2, 2, 3, 16}, {4, 0, 4, 5, 7, 64}, {5, 2, 3, 3, 2, 70}, {2, 1, 1, 4, 9, 130}, {6, 3, 3, 1, 5, 15},
	} {
		lhs := make([]float32, s.B*s.M*s.K)
		rhs := make([]float32, s.B*s.N*s.K)
		for i := range lhs {
			lhs[i] = rng.Float32()*2 - 1
		}
		for i := range rhs {
			rhs[i] = rng.Float32()*2 - 1
		}
		got := make([]float32, s.B*s.M*s.N)
		for i := range got {
			got[i] = 99 // items outside [start, start+count) must keep it
		}
		avx512SmallFloat32Transposed(lhs, rhs, s.start, s.count, s.M, s.N, s.K, got)
		for b := range s.B {
			for i := range s.M {
				for j := range s.N {
					want := float64(99)
					if b >= s.start && b < s.start+s.count {
						want = 0
						for k := range s.K {
							want += float64(lhs[(b*s.M+i)*s.K+k]) * float64(rhs[(b*s.N+j)*s.K+k])
						}
					}
					if g := got[(b*s.M+i)*s.N+j]; math.Abs(float64(g)-want) > 1e-4*(1+math.Abs(want)) {
						t.Fatalf("%+v: item %d [%d, %d] = %g, want %g", s, b, i, j, g, want)
					}
				}
			}
		}
	}
}
