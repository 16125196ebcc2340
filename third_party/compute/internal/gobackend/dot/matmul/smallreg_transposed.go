// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package matmul

import (
	"unsafe"

	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/internal/gobackend/dot"
	"github.com/gomlx/compute/internal/transpose32"
)

// transposedRowsForRegisterKernel is the number of lhs rows from which a small transposed matmul
// (rhs [N, K]) transposes its rhs once and runs the register-blocked kernel: the transpose moves
// K·N values, the product does M·K·N multiply-adds, and the transposed kernel's per-output
// horizontal sums cost more than the move from a few rows on (decode's LM head with tied
// embeddings: 64 rows, measured 4× slower than the non-transposed product of the same size).
const transposedRowsForRegisterKernel = 16

// decodeRows is the most lhs rows for which a large non-transposed product still runs the
// register-blocked kernel (split by columns across workers) rather than the packing one.
const decodeRows = 64

// avx512SmallTransposedViaRegisters computes lhs [B, M, K] · rhs [B, N, K]ᵀ by transposing rhs into a
// pooled buffer and running the non-transposed small kernel. It reports false (nothing written)
// when no buffer could be had.
func avx512SmallTransposedViaRegisters(backend *gobackend.Backend, lhs, rhs []float32, batchSize, M, N, K int, output []float32) bool {
	return smallTransposedVia(backend, rhs, batchSize, N, K, func(rhsT []float32) {
		avx512SmallFloat32Parallel(backend, dot.LayoutNonTransposed, lhs, rhsT, batchSize, M, N, K, output)
	})
}

// avx2SmallTransposedViaRegisters is avx512SmallTransposedViaRegisters with the AVX2 kernel.
func avx2SmallTransposedViaRegisters(backend *gobackend.Backend, lhs, rhs []float32, batchSize, M, N, K int, output []float32) bool {
	return smallTransposedVia(backend, rhs, batchSize, N, K, func(rhsT []float32) {
		avx2SmallFloat32Parallel(backend, dot.LayoutNonTransposed, lhs, rhsT, batchSize, M, N, K, output)
	})
}

// smallTransposedVia transposes rhs [B, N, K] into a pooled [B, K, N] buffer and hands it to run.
func smallTransposedVia(backend *gobackend.Backend, rhs []float32, batchSize, N, K int, run func(rhsT []float32)) bool {
	ref, rhsT, ok := GetBuffer[float32](backend, batchSize*K*N)
	if !ok {
		return false
	}
	defer ReleaseBuffer(ref)
	for b := range batchSize {
		transposeBlocked(rhs[b*N*K:(b+1)*N*K], rhsT[b*K*N:(b+1)*K*N], N, K)
	}
	run(rhsT)
	return true
}

// transposeBlocked writes dst [cols, rows] = src [rows, cols]ᵀ: the whole 8×8 blocks in AVX2
// registers (transpose32.Block8x8AVX2: 68 → 10 µs for a 264×384 matrix), the edges element by
// element. Values are only moved, so the results are the same. Its callers run on the AVX2 and
// AVX-512 routers only.
func transposeBlocked(src, dst []float32, rows, cols int) {
	const blk = 8
	src, dst = src[:rows*cols], dst[:rows*cols]
	rows8, cols8 := rows-rows%blk, cols-cols%blk
	for r0 := 0; r0 < rows8; r0 += blk {
		for c0 := 0; c0 < cols8; c0 += blk {
			_ = src[(r0+blk-1)*cols+c0+blk-1] // rows r0…r0+7, columns c0…c0+7
			_ = dst[(c0+blk-1)*rows+r0+blk-1] // rows c0…c0+7, columns r0…r0+7
			transpose32.Block8x8AVX2(unsafe.Pointer(&src[r0*cols+c0]), uintptr(4*cols), unsafe.Pointer(&dst[c0*rows+r0]), uintptr(4*rows))
		}
	}
	for r := 0; r < rows; r++ { // the edges: the last rows%8 rows, and every row's last cols%8
		c0 := cols8
		if r >= rows8 {
			c0 = 0
		}
		row := src[r*cols : (r+1)*cols]
		for c := c0; c < cols; c++ {
			dst[c*rows+r] = row[c]
		}
	}
}
