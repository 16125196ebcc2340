// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package matmul

import (
	"fmt"
	"simd/archsimd"
	"testing"

	"github.com/gomlx/compute/internal/gobackend"
)

// BenchmarkDecodeColdWeights: the decode step's products ([64, K] × [K, N]) split by columns across
// the backend's workers as in a generation graph, each call on the next of enough distinct weights
// (about 64 MB) that they come from memory, as a decode step's do (the base preset's six layers
// hold 38 MB of weights).
//
//	cd third_party/compute && GOEXPERIMENT=simd go test ./internal/gobackend/dot/matmul/ -run '^$' -bench DecodeColdWeights
func BenchmarkDecodeColdWeights(b *testing.B) {
	if !archsimd.X86.AVX512() {
		b.Skip("no AVX-512")
	}
	for _, par := range []int{1, 2} {
		be, err := gobackend.New(fmt.Sprintf("parallelism=%d", par))
		if err != nil {
			b.Fatal(err)
		}
		backend := be.(*gobackend.Backend)
		for _, s := range []struct{ M, N, K int }{{64, 2048, 384}, {64, 384, 1024}, {64, 640, 384}, {64, 384, 384}} {
			copies := max(2, (64<<20)/(4*s.K*s.N))
			lhs := make([]float32, s.M*s.K)
			for i := range lhs {
				lhs[i] = float32(i%7) / 7
			}
			rhs := make([][]float32, copies)
			for c := range rhs {
				rhs[c] = make([]float32, s.K*s.N)
				for i := range rhs[c] {
					rhs[c][i] = float32((i+c)%5) / 5
				}
			}
			out := make([]float32, s.M*s.N)
			b.Run(fmt.Sprintf("p%d/%dx%dx%d", par, s.M, s.N, s.K), func(b *testing.B) {
				for i := range b.N {
					r := rhs[i%copies]
					if par == 1 {
						avx512SmallRegFloat32(lhs, r, 0, 1, s.M, s.N, s.K, out)
					} else {
						avx512SmallRegByColumns(backend, lhs, r, 1, s.M, s.N, s.K, out, par)
					}
				}
				b.ReportMetric(float64(2*s.M*s.N*s.K)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
		backend.Finalize()
	}
}
