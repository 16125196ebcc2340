// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

// Package simdstate clears the upper halves of the AVX registers after vector code.
//
// Go compiles scalar float arithmetic to non-VEX SSE instructions. After AVX/AVX-512 code (the
// archsimd kernels) leaves the upper register halves dirty, each such instruction carries a
// dependency on them: on the machines measured here a scalar loop ran 5–10x slower until a
// VZEROUPPER. Nothing in Go emits it, so kernels' callers do, through ClearUpper.
package simdstate
