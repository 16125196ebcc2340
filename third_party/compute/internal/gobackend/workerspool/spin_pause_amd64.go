// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package workerspool

// pause runs n PAUSE instructions (n > 0), as the runtime's procyield: a spinning helper leaves
// the core's resources to its SMT sibling (the caller's thread, on a 2-vCPU VM perhaps).
//
//go:noescape
func pause(n uint32)
