// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

// Package transpose32 holds the 8×8 register transpose of 4-byte elements that the backend's
// transposes (gobackend/ops) and the transposed small matmul (gobackend/dot/matmul) share: one copy
// of the assembly. It moves bits only, so any 4-byte type transposes exactly.
package transpose32
