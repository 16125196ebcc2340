// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package matmul

import (
	"fmt"
	"simd/archsimd"
	"testing"
)

// BenchmarkRegTiles compares, in one run and on one thread, the compiler-generated register tiles
// with the assembly ones on decode-shaped products (64 rows): the whole product tiled with each.
//
//	cd third_party/compute && GOEXPERIMENT=simd go test ./internal/gobackend/dot/matmul/ -run '^$' -bench RegTiles
func BenchmarkRegTiles(b *testing.B) {
	type tile struct {
		name       string
		rows, cols int
		fn         func(l, r, o []float32, j, N, K int)
		ok         bool
	}
	tiles := []tile{
		{"avx512/go-4x32", 4, 32, smallRegTile4x32, archsimd.X86.AVX512()},
		{"avx512/asm-8x32", 8, 32, smallRegTile8x32, archsimd.X86.AVX512()},
		{"avx2/go-4x16", 4, 16, avx2RegTile4x16, archsimd.X86.AVX2()},
		{"avx2/asm-6x16", 6, 16, avx2RegTile6x16, archsimd.X86.AVX2()},
	}
	for _, s := range []struct{ M, N, K int }{{48, 384, 128}, {48, 1024, 384}, {48, 384, 1024}} {
		lhs := make([]float32, s.M*s.K)
		rhs := make([]float32, s.K*s.N)
		out := make([]float32, s.M*s.N)
		for i := range lhs {
			lhs[i] = float32(i%7) / 7
		}
		for i := range rhs {
			rhs[i] = float32(i%5) / 5
		}
		for _, t := range tiles {
			if !t.ok {
				continue
			}
			b.Run(fmt.Sprintf("%s/%dx%dx%d", t.name, s.M, s.N, s.K), func(b *testing.B) {
				for range b.N {
					for j := 0; j+t.cols <= s.N; j += t.cols {
						for i := 0; i+t.rows <= s.M; i += t.rows {
							t.fn(lhs[i*s.K:(i+t.rows)*s.K], rhs, out[i*s.N:(i+t.rows)*s.N], j, s.N, s.K)
						}
					}
				}
				archsimd.ClearAVXUpperBits()
				b.ReportMetric(float64(2*s.M*s.N*s.K)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// TestSmallRegTileNextMatchesTile: the tile that also prefetches the next strip
// (smallRegTile8x32Next, Temper fork) writes the same bits as smallRegTile8x32, for a strip with a
// next one and for the last strip (no prefetch past the row), and leaves every other element alone.
func TestSmallRegTileNextMatchesTile(t *testing.T) {
	if !archsimd.X86.AVX512() {
		t.Skip("no AVX-512")
	}
	for _, s := range []struct{ N, K, j int }{{64, 5, 0}, {64, 5, 32}, {2048, 384, 992}, {2048, 384, 2016}, {96, 1, 64}} {
		l := make([]float32, 8*s.K)
		r := make([]float32, s.K*s.N)
		for i := range l {
			l[i] = float32(i%11)/11 - 0.4
		}
		for i := range r {
			r[i] = float32(i%13)/13 - 0.3
		}
		want, got := make([]float32, 8*s.N), make([]float32, 8*s.N)
		for i := range want {
			want[i], got[i] = -7, -7
		}
		smallRegTile8x32(l, r, want, s.j, s.N, s.K)
		smallRegTile8x32Next(l, r, got, s.j, s.N, s.K)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("N %d K %d j %d: element %d = %g, the tile without prefetch gives %g", s.N, s.K, s.j, i, got[i], want[i])
			}
		}
	}
}
