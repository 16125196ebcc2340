// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build !amd64 || !goexperiment.simd

package fusedops

// vecAVX512 is flashvec512_amd64.go's switch, always off in this build (TestDecodeRowsSameBits).
var vecAVX512 = false
